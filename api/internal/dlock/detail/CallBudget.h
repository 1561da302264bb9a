// SPDX-License-Identifier: Apache-2.0
// CallBudget.h — the deadline of the wait a backend call runs inside, so that a command sent by
// a timed wait gets at most the budget the wait has left (DESIGN.md, "One wait loop").
//
//   CallBudget scope(deadline[, floor]);  calls on this thread get at most until `deadline` (but
//                                 never less than `floor`) while it lives
//   CallBudget::current()         the innermost scope's deadline; time_point::max() when none
//   CallBudget::cap(timeout)      `timeout` cut to the time left, never below the scope's floor
//
// A wait's last attempt is made at its deadline (a remembered failure never answers a wait with
// budget left), so a call started with no time left still gets its floor: the wait's own from the
// round trips it measured (WaitPolicy::answerFloor: a slow link's reply is read, not cut off and
// its connection closed), kLastAttemptFloor when none, long enough for a loopback round trip.
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

  explicit CallBudget(TimePoint deadline, std::chrono::milliseconds floor = kLastAttemptFloor) noexcept
      : previous_(slot()) {
    // The nearer deadline wins, and with it its floor.
    if (deadline < previous_.deadline) slot() = State{deadline, std::max(floor, kLastAttemptFloor).count()};
  }
  CallBudget(const CallBudget&) = delete;
  CallBudget& operator=(const CallBudget&) = delete;
  ~CallBudget() { slot() = previous_; }

  [[nodiscard]] static TimePoint current() noexcept { return slot().deadline; }

  // `timeout` cut to what is left of the current budget (at least its floor); `timeout` itself
  // outside any budget. A zero `timeout` (none) becomes the time left when there is one.
  [[nodiscard]] static std::chrono::milliseconds cap(std::chrono::milliseconds timeout) noexcept {
    const State& state = slot();
    if (state.deadline == TimePoint::max()) return timeout;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(state.deadline - Clock::now());
    const auto bounded = std::max(left, std::chrono::milliseconds(state.floorMs));
    return timeout.count() <= 0 ? bounded : std::min(timeout, bounded);
  }

  // Whether the current budget has run out (there is one, and its deadline has passed).
  [[nodiscard]] static bool spent() noexcept {
    const TimePoint deadline = slot().deadline;
    return deadline != TimePoint::max() && Clock::now() >= deadline;
  }

 private:
  struct State {
    TimePoint deadline;
    std::chrono::milliseconds::rep floorMs;
  };
  static State& slot() noexcept {
    static thread_local State state{TimePoint::max(), kLastAttemptFloor.count()};
    return state;
  }

  const State previous_;
};

}  // namespace dlock::detail
