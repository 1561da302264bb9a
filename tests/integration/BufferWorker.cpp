// SPDX-License-Identifier: Apache-2.0
// dlock_buffer_worker — one process of the bounded buffer in Redis (BufferProcessesTest): a list
// of at most kCapacity items under one lock key, with the conditions "not-full" and "not-empty".
//
//   producer URI KEY LIST NAME COUNT fair|default WAITER_LEASE_MS
//       puts NAME:0 .. NAME:COUNT-1, each inside the hold after waiting on not-full while the list
//       is full; the length RPUSH answers above kCapacity is a violation. Prints "ready" once
//       connected and starts at a line on stdin; prints "done VIOLATIONS WAITS" at the end (WAITS:
//       awaits on not-full).
//   consumer URI KEY LIST OUT fair|default WAITER_LEASE_MS
//       takes one item per hold, waiting on not-empty while the list is empty, and appends
//       "ITEM CLOCK_MONOTONIC-ns" to OUT with one write(2) each (a kill -9 loses no recorded line);
//       ends after taking an item "stop:...".
// Exit: 0 done, 1 error (on stderr), 2 usage.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>

#include "RedisClient.h"
#include "dlock/connect.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/uri.h"

namespace {

constexpr long long kCapacity = 16;

struct Buffer {
  Buffer(const std::string& uri, bool fair, long long waiterLeaseMs, std::string lockKey, std::string listKey)
      : lock(dlock::LockBuilder()
                 .backend(dlock::connect(uri))
                 .fair(fair)
                 .waiterLease(std::chrono::milliseconds(waiterLeaseMs))
                 .build()),
        key(std::move(lockKey)),
        list(std::move(listKey)),
        notFull(lock->newCondition(key, "not-full")),
        notEmpty(lock->newCondition(key, "not-empty")),
        data(dlock::parseUri(uri).hosts.front().host, dlock::parseUri(uri).hosts.front().port) {}

  std::shared_ptr<dlock::ILock> lock;
  std::string key;
  std::string list;
  dlock::Condition notFull;
  dlock::Condition notEmpty;
  dlock::test::RedisClient data;
};

int produce(Buffer& buffer, const std::string& name, int count) {
  std::printf("ready\n");  // connected; the test says when to start
  std::fflush(stdout);
  char go[16];
  if (std::fgets(go, sizeof go, stdin) == nullptr) return 1;
  long long violations = 0;
  long long waits = 0;
  for (int i = 0; i < count; ++i) {
    buffer.lock->lock(buffer.key);
    while (buffer.data.ok({"LLEN", buffer.list}).integer >= kCapacity) {
      ++waits;
      buffer.notFull.await();
    }
    if (buffer.data.ok({"RPUSH", buffer.list, name + ":" + std::to_string(i)}).integer > kCapacity) ++violations;
    buffer.notEmpty.signal();
    buffer.lock->unlock(buffer.key);
  }
  std::printf("done %lld %lld\n", violations, waits);
  return 0;
}

long long monotonicNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int consume(Buffer& buffer, const std::string& out) {
  const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + out);
  bool stopped = false;
  while (!stopped) {
    buffer.lock->lock(buffer.key);
    while (buffer.data.ok({"LLEN", buffer.list}).integer == 0) buffer.notEmpty.await();
    const std::string item = buffer.data.ok({"LPOP", buffer.list}).str;
    const std::string line = item + " " + std::to_string(monotonicNanos()) + "\n";
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw std::runtime_error("cannot write " + out);
    }
    stopped = item.rfind("stop:", 0) == 0;
    buffer.notFull.signal();
    buffer.lock->unlock(buffer.key);
  }
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "producer" && argc == 9) {
      Buffer buffer(argv[2], std::string(argv[7]) == "fair", std::atoll(argv[8]), argv[3], argv[4]);
      return produce(buffer, argv[5], std::atoi(argv[6]));
    }
    if (mode == "consumer" && argc == 8) {
      Buffer buffer(argv[2], std::string(argv[6]) == "fair", std::atoll(argv[7]), argv[3], argv[4]);
      return consume(buffer, argv[5]);
    }
    std::fprintf(stderr,
                 "usage: %s producer URI KEY LIST NAME COUNT fair|default WAITER_LEASE_MS\n"
                 "       %s consumer URI KEY LIST OUT fair|default WAITER_LEASE_MS\n",
                 argv[0], argv[0]);
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_buffer_worker: %s\n", error.what());
    return 1;
  }
}
