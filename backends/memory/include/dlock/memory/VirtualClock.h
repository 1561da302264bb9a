// SPDX-License-Identifier: Apache-2.0
// VirtualClock.h — a Clock that only moves when a test advances it.
//
//   auto clock = std::make_shared<dlock::VirtualClock>();
//   auto backend = std::make_shared<dlock::MemoryOperator>(clock);
//   auto lock = dlock::LockBuilder().backend(backend).clock(clock).leaseTime(30s).build();
//   clock->advance(30s);   // the lease ends now, without sleeping
//
// Leases, the watchdog and every wait of a lock built on this clock follow it: a tryLock,
// a semaphore's tryAcquire or a Condition's awaitFor sleeps until advance() brings its deadline,
// its next recheck or pause, or until a release, a signal or a cancel wakes it at once.
//
//   call                       effect
//   waitUntil(lock, cv, t)     sleeps on `cv` until notified (the caller's release, advance(), a
//                              cancel), or returns at once when now() >= t
//   advance(step)              moves now() on, wakes the sleepers now due, and returns once each
//                              thread that waits on this clock sleeps again with a later deadline
//                              or has left (forgetWaiter); at most 5 s of real time
//   awaitSleepers(n)           blocks until n threads sleep on this clock: the test's "the worker
//                              is waiting now", before it advances
//
// Owner: shared by the locks and backends of a test. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <thread>

#include "dlock/Clock.h"

namespace dlock {

class VirtualClock final : public Clock {
 public:
  // Starts at an arbitrary non-zero time.
  VirtualClock();

  [[nodiscard]] time_point now() const override;
  void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) override;
  void forgetWaiter() override;

  // Moves time forward by `step`, wakes every sleeper whose deadline it reached, then waits (at
  // most 5 s of real time) until every waiting thread has handled the new time: asleep again with
  // a deadline past the new now(), or gone (forgetWaiter()).
  void advance(std::chrono::nanoseconds step);

  // Threads asleep on this clock now (a lock's watchdog is one).
  [[nodiscard]] std::size_t sleepers() const;
  // Blocks until at least `count` threads sleep on this clock; false when `budget` of real time
  // passed first.
  [[nodiscard]] bool awaitSleepers(std::size_t count,
                                   std::chrono::milliseconds budget = std::chrono::milliseconds(10000)) const;

 private:
  // A thread that waits on this clock, from its first waitUntil() to its forgetWaiter().
  struct Waiter {
    std::condition_variable* cv = nullptr;  // while asleep: what advance() notifies
    std::mutex* mutex = nullptr;            // and the mutex the sleeper waits with
    time_point deadline = time_point::max();
    bool asleep = false;
    unsigned notifying = 0;  // advance() calls notifying cv: the sleeper keeps cv alive until they are done
  };
  [[nodiscard]] bool settled() const;  // with mutex_ held

  mutable std::mutex mutex_;              // taken under a sleeper's mutex, never the other way round
  mutable std::condition_variable changed_;  // a waiter slept, woke or left; a notify ended
  time_point now_;                        // guarded by mutex_
  std::map<std::thread::id, Waiter> waiters_;  // guarded by mutex_
};

}  // namespace dlock
