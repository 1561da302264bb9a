/* SPDX-License-Identifier: Apache-2.0 */
/* SlowResolve.c — preloaded into a test process: getaddrinfo of a name ending in ".slow.test" waits
 * DLOCK_SLOW_RESOLVE_MS, then answers as for 127.0.0.1; a DNS server slow to answer, with no DNS
 * server (tests never reach one). A numeric-only lookup of such a name fails at once, as glibc's
 * does. Every other call goes to the real getaddrinfo. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*GetAddrInfo)(const char*, const char*, const struct addrinfo*, struct addrinfo**);

static int slowName(const char* node) {
  static const char suffix[] = ".slow.test";
  const size_t length = node == NULL ? 0 : strlen(node);
  return length >= sizeof suffix - 1 && strcmp(node + length - (sizeof suffix - 1), suffix) == 0;
}

int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints, struct addrinfo** res) {
  GetAddrInfo real = (GetAddrInfo)dlsym(RTLD_NEXT, "getaddrinfo");
  if (real == NULL) return EAI_SYSTEM;
  if (!slowName(node)) return real(node, service, hints, res);
  if (hints != NULL && (hints->ai_flags & AI_NUMERICHOST) != 0) return EAI_NONAME;
  const char* wait = getenv("DLOCK_SLOW_RESOLVE_MS");
  const long ms = wait == NULL ? 0 : atol(wait);
  struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&pause, &pause) != 0) {
  }
  return real("127.0.0.1", service, hints, res);
}
