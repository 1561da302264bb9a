// SPDX-License-Identifier: Apache-2.0
/* ClockShift.c — an LD_PRELOAD library that moves a process's wall clock (CLOCK_REALTIME,
 * gettimeofday, time) by the number of seconds in the file $DLOCK_CLOCK_SHIFT_FILE, re-read at
 * most every 50 ms, so that a fault test can jump a redis-server's clock while it runs. Monotonic
 * clocks are left alone.
 *
 * Debian's libfaketime cannot do this to Debian's redis-server: its jemalloc calls clock_gettime
 * while libfaketime initialises (dlsym allocates), and the server dies of the recursion
 * (wolfcw/libfaketime#130). This shim allocates nothing and calls no libc function that might:
 * the clock comes from the clock_gettime system call and the file from open/read. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static _Atomic long long shiftSeconds;
static _Atomic long long nextReadNs;

static int rawClock(clockid_t clock, struct timespec* out) { return (int)syscall(SYS_clock_gettime, clock, out); }

static long long shift(void) {
  struct timespec now;
  rawClock(CLOCK_MONOTONIC, &now);
  const long long nowNs = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
  if (nowNs < atomic_load(&nextReadNs)) return atomic_load(&shiftSeconds);
  atomic_store(&nextReadNs, nowNs + 50000000LL);
  const char* path = getenv("DLOCK_CLOCK_SHIFT_FILE");
  if (path == NULL) return 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return atomic_load(&shiftSeconds);
  char text[32];
  const ssize_t length = read(fd, text, sizeof text - 1);
  close(fd);
  if (length <= 0) return atomic_load(&shiftSeconds);
  long long value = 0;
  int sign = 1;
  for (ssize_t i = 0; i < length; ++i) {
    if (text[i] == '-') sign = -1;
    else if (text[i] >= '0' && text[i] <= '9') value = value * 10 + (text[i] - '0');
    else if (text[i] != '+' && text[i] != ' ') break;
  }
  atomic_store(&shiftSeconds, sign * value);
  return sign * value;
}

static int isWallClock(clockid_t clock) {
  return clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE;
}

int clock_gettime(clockid_t clock, struct timespec* out) {
  const int result = rawClock(clock, out);
  if (result == 0 && isWallClock(clock)) out->tv_sec += shift();
  return result;
}

int gettimeofday(struct timeval* restrict out, void* restrict zone) {
  (void)zone;
  struct timespec now;
  const int result = rawClock(CLOCK_REALTIME, &now);
  if (result == 0 && out != NULL) {
    out->tv_sec = now.tv_sec + shift();
    out->tv_usec = now.tv_nsec / 1000;
  }
  return result;
}

time_t time(time_t* out) {
  struct timespec now;
  rawClock(CLOCK_REALTIME, &now);
  const time_t seconds = now.tv_sec + shift();
  if (out != NULL) *out = seconds;
  return seconds;
}
