// SPDX-License-Identifier: Apache-2.0
// VirtualClock (dlock/memory/VirtualClock.h) driving waits on the memory backend: a tryLock, a
// semaphore's tryAcquire and a Condition's awaitFor sleep on the virtual clock, advance() ends
// them in no real time and returns once they have run, a release or a cancel still ends them at
// once. Each wait runs on a worker; the test waits for it to sleep on the clock (awaitSleepers),
// never for a time window, and measures the real time the wait took.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "Fixtures.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

// A wait run on its own thread: its result, the real time it took, the virtual time it ended at.
template <class Result>
struct TimedWait {
  std::optional<Result> result;
  bool interrupted = false;
  Steady::duration real{};
  dlock::Clock::time_point endedAt{};
  std::thread thread;

  template <class Wait>
  TimedWait(const dlock::VirtualClock& clock, Wait wait)
      : thread([this, &clock, wait] {
          const auto start = Steady::now();
          try {
            result = wait();
          } catch (const dlock::InterruptedError&) {
            interrupted = true;
          }
          real = Steady::now() - start;
          endedAt = clock.now();
        }) {}
  TimedWait(const TimedWait&) = delete;
  TimedWait& operator=(const TimedWait&) = delete;
  ~TimedWait() {
    if (thread.joinable()) thread.join();
  }
  void join() { thread.join(); }
};

// Held by another owner for an hour: only a release or the hour ends it.
void holdElsewhere(dlock::MemoryOperator& backend, const std::string& key) {
  REQUIRE(backend.lock(key, "another-owner", 1h).acquired);
}

// The least real time of up to three runs of `run` (each returns its wait's real time), stopping
// at one under `bound`: a thread preempted for a scheduler tick on a busy machine is no slow wait.
template <class Run>
Steady::duration bestOfThree(Run run, Steady::duration bound) {
  Steady::duration best = Steady::duration::max();
  for (int round = 0; round < 3 && best >= bound; ++round) best = std::min(best, run());
  return best;
}

double millis(Steady::duration duration) { return std::chrono::duration<double, std::milli>(duration).count(); }

// A 30 s tryLock on a key held elsewhere, on the virtual clock: the real time it took.
Steady::duration thirtySecondTryLock() {
  dlock::test::VirtualFixture f;
  holdElsewhere(*f.backend, "k");
  auto lock = f.leased(60s);
  const auto start = f.clock->now();
  TimedWait<bool> wait(*f.clock, [&] { return lock->tryLock("k", 30s); });
  REQUIRE(f.clock->awaitSleepers(1));
  f.clock->advance(29s);
  CHECK(f.clock->sleepers() == 1);  // rechecked at its pause's end, asleep again: 1 s is left
  f.clock->advance(1s);
  // advance() returned once the wait had run out: counted before the worker even returned.
  CHECK(lock->stats().failedTries == 1);
  wait.join();
  REQUIRE(wait.result.has_value());
  CHECK_FALSE(*wait.result);
  CHECK(wait.endedAt - start == 30s);
  return wait.real;
}

// A 30 s tryAcquire of a semaphore's only permit, held elsewhere: the real time it took.
Steady::duration thirtySecondTryAcquire() {
  dlock::test::VirtualFixture f;
  const auto build = [&] {
    return dlock::SemaphoreBuilder().backend(f.backend).clock(f.clock).name("s").permits(1).leaseTime(1h).build();
  };
  auto holder = build();
  const dlock::PermitLease held = holder->tryAcquire(1);
  REQUIRE(held);
  auto semaphore = build();
  const auto start = f.clock->now();
  TimedWait<bool> wait(*f.clock, [&] { return static_cast<bool>(semaphore->tryAcquire(1, 30s)); });
  REQUIRE(f.clock->awaitSleepers(1));
  f.clock->advance(30s);
  wait.join();
  REQUIRE(wait.result.has_value());
  CHECK_FALSE(*wait.result);
  CHECK(wait.endedAt - start == 30s);
  return wait.real;
}

// A 30 s awaitFor nobody signals: the real time of the awaitFor call alone (no lock, no unlock).
Steady::duration thirtySecondAwaitFor() {
  dlock::test::VirtualFixture f;
  // The waiter's place lives a minute (its watchdog renews it every 20 s on the same clock).
  auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(60s).waiterLease(60s).build();
  dlock::Condition ready = lock->newCondition("q", "ready");
  const auto start = f.clock->now();
  Steady::duration awaited{};
  TimedWait<bool> wait(*f.clock, [&] {
    lock->lock("q");
    const auto began = Steady::now();
    const bool signalled = ready.awaitFor(30s);
    awaited = Steady::now() - began;
    const bool heldAgain = lock->isHeld("q");
    lock->unlock("q");
    return signalled || !heldAgain;
  });
  REQUIRE(f.clock->awaitSleepers(2));  // the waiter and its place's watchdog
  f.clock->advance(30s);
  wait.join();
  REQUIRE(wait.result.has_value());
  CHECK_FALSE(*wait.result);  // not signalled, and holding the key again
  CHECK(wait.endedAt - start == 30s);
  return awaited;
}

}  // namespace

TEST_SUITE("VirtualClock") {
  TEST_CASE("a 30 s tryLock on a held key times out in under 10 ms of real time") {
    const Steady::duration real = bestOfThree(thirtySecondTryLock, 10ms);
    MESSAGE("a 30 s tryLock timed out in " << millis(real) << " ms of real time");
    CHECK(real < 10ms);
  }

  TEST_CASE("a 30 s semaphore tryAcquire of taken permits times out in under 10 ms of real time") {
    const Steady::duration real = bestOfThree(thirtySecondTryAcquire, 10ms);
    MESSAGE("a 30 s tryAcquire timed out in " << millis(real) << " ms of real time");
    CHECK(real < 10ms);
  }

  TEST_CASE("a 30 s Condition awaitFor without a signal returns false in under 10 ms of real time") {
    const Steady::duration real = bestOfThree(thirtySecondAwaitFor, 10ms);
    MESSAGE("a 30 s awaitFor timed out in " << millis(real) << " ms of real time");
    CHECK(real < 10ms);
  }

  TEST_CASE("a wait that a release at virtual 5 s ends takes the key at 5 s") {
    dlock::test::VirtualFixture f;
    holdElsewhere(*f.backend, "k");
    auto lock = f.leased(60s);
    const auto start = f.clock->now();
    TimedWait<bool> wait(*f.clock, [&] {
      const bool got = lock->tryLock("k", 30s);
      if (got) lock->unlock("k");
      return got;
    });
    REQUIRE(f.clock->awaitSleepers(1));
    f.clock->advance(5s);
    CHECK(f.clock->sleepers() == 1);  // still waiting: the key is held
    REQUIRE(f.backend->unlock("k", "another-owner").released);
    wait.join();
    REQUIRE(wait.result.has_value());
    CHECK(*wait.result);
    CHECK(wait.endedAt - start == 5s);
  }

  TEST_CASE("a cancel ends a wait on the virtual clock at once, the clock unmoved") {
    dlock::test::VirtualFixture f;
    holdElsewhere(*f.backend, "k");
    auto lock = f.leased(60s);
    dlock::CancelSource stop;
    const auto start = f.clock->now();
    TimedWait<bool> wait(*f.clock, [&] {
      dlock::AcquireOptions options;
      options.waitTime = 30s;
      options.cancel = stop.token();
      return static_cast<bool>(lock->acquire("k", options));
    });
    REQUIRE(f.clock->awaitSleepers(1));
    stop.requestCancel();
    wait.join();  // no advance(): only the cancel can end it
    CHECK(wait.interrupted);
    CHECK(wait.endedAt == start);
    CHECK(f.clock->sleepers() == 0);
  }

  TEST_CASE("advance() wakes a sleeper whose deadline it reaches, and only those") {
    dlock::VirtualClock clock;
    std::mutex mutex;
    std::condition_variable cv;
    bool woken = false;
    std::thread sleeper([&] {
      std::unique_lock<std::mutex> guard(mutex);
      const auto deadline = clock.now() + 10s;
      while (clock.now() < deadline) clock.waitUntil(guard, cv, deadline);
      woken = true;
      guard.unlock();
      clock.forgetWaiter();
    });
    REQUIRE(clock.awaitSleepers(1));
    clock.advance(9s);
    CHECK(clock.sleepers() == 1);
    clock.advance(1s);  // returns once the sleeper has left
    CHECK(clock.sleepers() == 0);
    sleeper.join();
    CHECK(woken);
  }
}
