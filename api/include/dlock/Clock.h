// SPDX-License-Identifier: Apache-2.0
// Clock.h — the monotonic time source for leases, the watchdog and every wait.
//
// Clock is injectable so tests can run on a virtual clock (dlock::VirtualClock in
// <dlock/memory/VirtualClock.h>): a 30 s lease expires, and a 30 s tryLock, tryAcquire or
// awaitFor times out, in microseconds of real time. SteadyClock is
// the production clock: std::chrono::steady_clock, so a wall-clock jump changes nothing.
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

namespace dlock {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;

  Clock() = default;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
  virtual ~Clock() = default;

  [[nodiscard]] virtual time_point now() const = 0;

  // Blocks on `cv` (with `lock` held by the caller) until notified, spuriously woken, or until
  // now() reaches `deadline`. Callers loop and re-check their condition, as with
  // std::condition_variable::wait_until.
  virtual void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) = 0;

  // Tells the clock that the thread that called waitUntil() will not call it again
  // (a VirtualClock stops waiting for it to settle after advance()).
  virtual void forgetWaiter() {}
};

class SteadyClock final : public Clock {
 public:
  [[nodiscard]] time_point now() const override { return std::chrono::steady_clock::now(); }

  void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) override {
    cv.wait_until(lock, deadline);
  }

  // The process-wide instance, the default everywhere a clock is optional.
  static std::shared_ptr<Clock> instance() {
    static const std::shared_ptr<Clock> clock = std::make_shared<SteadyClock>();
    return clock;
  }
};

namespace detail {
// The instance made while the program loads, so that a child forked while another thread made it
// never waits on its guard; the function keeps the static for any static initialiser that runs first.
inline const bool steadyClockMadeAtLoad = (SteadyClock::instance(), true);
}  // namespace detail

}  // namespace dlock
