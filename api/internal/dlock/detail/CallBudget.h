// SPDX-License-Identifier: Apache-2.0
// CallBudget.h — the deadline of the wait a backend call runs inside, so that a command sent by
// a timed wait gets at most the budget the wait has left (DESIGN.md, "One wait loop").
//
//   CallBudget scope(deadline);   calls on this thread get at most until `deadline` while it lives
//   CallBudget::current()         the innermost scope's deadline; time_point::max() when none
//   CallBudget::cap(timeout)      `timeout` cut to the time left, never below kLastAttemptFloor
//
// A wait's last attempt is made at its deadline (a remembered failure never answers a wait with
// budget left), so a call started with no time left still gets kLastAttemptFloor: long enough for
// a loopback round trip, short enough that the wait returns within its budget plus a few ms.
// The state is one trivially constructed thread_local: no initialisation guard a forked child
// could find held. Owner: the calling thread. Thread safety: thread-local; scopes nest.
#pragma once

#include <algorithm>
#include <chrono>

namespace dlock::detail {

class CallBudget {
 public:
  using Clock = std::chrono::steady_clock;
  using TimePoint = Clock::time_point;
  static constexpr std::chrono::milliseconds kLastAttemptFloor{5};

  explicit CallBudget(TimePoint deadline) noexcept : previous_(slot()) { slot() = std::min(previous_, deadline); }
  CallBudget(const CallBudget&) = delete;
  CallBudget& operator=(const CallBudget&) = delete;
  ~CallBudget() { slot() = previous_; }

  [[nodiscard]] static TimePoint current() noexcept { return slot(); }

  // `timeout` cut to what is left of the current budget (at least kLastAttemptFloor); `timeout`
  // itself outside any budget. A zero `timeout` (none) becomes the time left when there is one.
  [[nodiscard]] static std::chrono::milliseconds cap(std::chrono::milliseconds timeout) noexcept {
    const TimePoint deadline = slot();
    if (deadline == TimePoint::max()) return timeout;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    const auto bounded = std::max(left, kLastAttemptFloor);
    return timeout.count() <= 0 ? bounded : std::min(timeout, bounded);
  }

  // Whether the current budget has run out (there is one, and its deadline has passed).
  [[nodiscard]] static bool spent() noexcept {
    const TimePoint deadline = slot();
    return deadline != TimePoint::max() && Clock::now() >= deadline;
  }

 private:
  static TimePoint& slot() noexcept {
    static thread_local TimePoint deadline = TimePoint::max();
    return deadline;
  }

  const TimePoint previous_;
};

}  // namespace dlock::detail
