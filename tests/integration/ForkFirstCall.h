// SPDX-License-Identifier: Apache-2.0
// ForkFirstCall.h — the worker side of ForkFirstCallTest (dlock_test_worker fork-first-call):
// fork() while this process's threads make their first lock call, so that a fork lands inside
// dlock's one-time initialisation (scripts and digests, the logger, URI tables, fork handlers).
//
//   fork-first-call URI KEY THREADS START_US EVERY_US plain|fair
//     THREADS threads, released at once, each connect to URI, build a lock (every other one fair
//     with "fair") and lock and unlock a key of their own. A further thread released with them
//     forks START_US later and every EVERY_US after that while those first calls run (at least
//     once). Each child makes the same cycle on its own connections and exits 0.
//     Prints "forks N inside M first-calls-us T" (M forks made while those calls ran), then exits 0 when every child exited 0 within its budget;
//     a child still running then is printed ("hung PID", its kernel and gdb stacks) and killed:
//     exit 3. A child that failed: exit 4; a thread of this process that failed: exit 1.
// Not thread-safe (one call per process: the point is that the calls are the first).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ForkedChild.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace dlock::test {

// A child makes one lock cycle (two with fair) on fresh connections: milliseconds. One that has
// not exited after this long waits on something that will never come.
inline constexpr std::chrono::seconds kForkedCycleBudget{10};
// Enough forks to cover a first call many times over, few enough for the loopback servers.
inline constexpr std::size_t kMaxForksAtFirstCall = 48;

// One lock cycle from nothing: the backend connected, a lock built, a key locked and unlocked.
inline void firstLockCycle(const std::string& uri, const std::string& key, bool fair) {
  LockBuilder builder;
  builder.backend(connect(uri));
  if (fair) {
    builder.fair();  // under the watchdog: its thread starts too
  } else {
    builder.leaseTime(std::chrono::seconds(10));
  }
  const auto lock = builder.build();
  lock->lock(key);
  lock->unlock(key);
}

// What a hung child waits on: the kernel's stack of its main thread and every thread's own.
inline void printStacks(pid_t pid) {
  const std::string id = std::to_string(pid);
  std::printf("hung %s\n", id.c_str());
  std::ifstream kernel("/proc/" + id + "/stack");
  for (std::string line; std::getline(kernel, line);) std::printf("kernel: %s\n", line.c_str());
  (void)std::fflush(stdout);
  const std::string gdb = "timeout 60 gdb -batch -nx -p " + id + " -ex 'thread apply all bt' 2>&1";
  if (FILE* out = ::popen(gdb.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, out) != nullptr) std::printf("gdb: %s", line);
    (void)::pclose(out);
  }
  (void)std::fflush(stdout);
}

inline int forkAtFirstCalls(const std::string& uri, const std::string& key, int threads, long startMicros,
                            long everyMicros, bool fair) {
  using Clock = std::chrono::steady_clock;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  const auto awaitGo = [&] {
    ready.fetch_add(1);
    while (!go.load()) std::this_thread::yield();
  };

  std::vector<std::thread> callers;
  for (int i = 0; i < threads; ++i) {
    callers.emplace_back([&, i] {
      awaitGo();
      try {
        firstLockCycle(uri, key + ":parent-" + std::to_string(i), fair && i % 2 == 1);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "thread %d: %s\n", i, error.what());
        failed.fetch_add(1);
      }
      done.fetch_add(1);
    });
  }

  std::vector<std::unique_ptr<ForkedChild>> children;
  std::vector<Clock::time_point> forkedAt;
  int inside = 0;  // forks made while first calls were running
  Clock::time_point finished;
  std::thread forker([&] {
    awaitGo();
    const Clock::time_point start = Clock::now();
    Clock::time_point next = start + std::chrono::microseconds(startMicros);
    do {
      while (Clock::now() < next) std::this_thread::yield();
      if (done.load() < threads) ++inside;
      forkedAt.push_back(Clock::now());
      children.push_back(std::make_unique<ForkedChild>([&] {
        const std::string own = key + ":child-" + std::to_string(::getpid());
        firstLockCycle(uri, own + ":plain", false);
        if (fair) firstLockCycle(uri, own + ":fair", true);
        return 0;
      }));
      next += std::chrono::microseconds(everyMicros);
    } while (done.load() < threads && children.size() < kMaxForksAtFirstCall);
    while (done.load() < threads) std::this_thread::yield();
    finished = Clock::now();
    std::printf("forks %zu inside %d first-calls-us %lld\n", children.size(), inside,
                static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(finished - start).count()));
  });

  while (ready.load() < threads + 1) std::this_thread::yield();
  go.store(true);
  for (auto& caller : callers) caller.join();
  forker.join();

  int result = failed.load() > 0 ? 1 : 0;
  const auto onHang = [&result](pid_t pid) {  // the first one's stacks; the others likely wait alike
    if (result != 3) return printStacks(pid);
    std::printf("hung %d\n", static_cast<int>(pid));
  };
  for (std::size_t i = 0; i < children.size(); ++i) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(forkedAt[i] + kForkedCycleBudget - Clock::now());
    const int status = children[i]->exitStatus(std::max(left, std::chrono::milliseconds(0)), onHang);
    if (status == ForkedChild::kHung) {
      result = 3;
    } else if (status != 0) {
      std::printf("child %zu exited %d\n", i, status);
      if (result == 0) result = 4;
    }
  }
  (void)std::fflush(stdout);
  return result;
}

}  // namespace dlock::test
