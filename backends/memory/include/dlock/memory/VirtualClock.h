// SPDX-License-Identifier: Apache-2.0
// VirtualClock.h — a Clock that only moves when a test advances it.
//
//   auto clock = std::make_shared<dlock::VirtualClock>();
//   auto backend = std::make_shared<dlock::MemoryOperator>(clock);
//   auto lock = dlock::LockBuilder().backend(backend).clock(clock).leaseTime(30s).build();
//   clock->advance(30s);   // the lease ends now, without sleeping
//
// advance() returns once every thread waiting on this clock (the watchdog) has run what became
// due, so the test sees the renewals that the new time triggers. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
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

  // Moves time forward by `step`, then waits (at most 5 s of real time) until every waiting
  // thread has handled the new time.
  void advance(std::chrono::nanoseconds step);

 private:
  mutable std::mutex mutex_;
  std::condition_variable settled_;
  time_point now_;                                 // guarded by mutex_
  unsigned long long epoch_ = 0;                   // guarded by mutex_; bumped by advance()
  std::map<std::thread::id, unsigned long long> waiters_;  // guarded by mutex_; epoch each has handled
};

}  // namespace dlock
