// SPDX-License-Identifier: Apache-2.0
// The default lock's wait on the memory backend: a release wakes one waiting lock (each lock here
// stands for a process), and a waiter listening for wake-ups rechecks the key on its own, so a
// wake-up that never comes costs it at most the recheck (DefaultAttempt::kRecheck).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "core/src/DefaultAttempt.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

constexpr auto kLongLease = 60s;

std::shared_ptr<dlock::ILock> waitingLock(const std::shared_ptr<dlock::IOperator>& backend) {
  // The release watch alone would recheck after a minute.
  return dlock::LockBuilder()
      .backend(backend)
      .waitStrategy(std::make_shared<dlock::NotifyWait>(kLongLease))
      .leaseTime(kLongLease)
      .build();
}

// True once `lock` has started its second try: the first found the key taken, then it listened.
bool listening(const dlock::ILock& lock) { return lock.stats().attempts >= 2; }

}  // namespace

TEST_SUITE("DefaultAttempt") {
  TEST_CASE("a release wakes one of the waiting locks, and each gets the key in turn") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    REQUIRE(backend->lock("k", "holder", kLongLease).acquired);
    std::vector<std::shared_ptr<dlock::ILock>> locks;
    std::vector<std::thread> threads;
    std::atomic<int> acquired{0};
    for (int i = 0; i < 3; ++i) locks.push_back(waitingLock(backend));
    for (auto& lock : locks) {
      threads.emplace_back([&acquired, lock] {
        if (lock->tryLock("k", 30s)) {
          ++acquired;
          lock->unlock("k");  // wakes the next one
        }
      });
    }
    for (auto& lock : locks) {
      while (!listening(*lock)) std::this_thread::yield();
    }
    CHECK(backend->unlock("k", "holder").notified == 1);  // every waiter's watch, before (3)
    for (auto& thread : threads) thread.join();
    CHECK(acquired == 3);
  }

  TEST_CASE("a listening waiter finds a key whose lease ended, unreleased, at its recheck") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    REQUIRE(backend->lock("k", "holder", kLongLease).acquired);
    auto waiter = waitingLock(backend);
    bool got = false;
    Steady::time_point gotAt;
    std::thread waiting([&] {
      got = waiter->tryLock("k", 45s);
      gotAt = Steady::now();
      if (got) waiter->unlock("k");
    });
    while (!listening(*waiter)) std::this_thread::yield();
    clock->advance(kLongLease + 1s);  // the holder's lease ends: no release, no wake-up
    const auto endedAt = Steady::now();
    waiting.join();
    REQUIRE(got);
    // Within its recheck (10 s; three on a busy machine), not at its deadline (45 s), where its watch
    // alone would have slept to.
    CHECK(gotAt - endedAt < 3 * dlock::detail::DefaultAttempt::kRecheck);
  }
}
