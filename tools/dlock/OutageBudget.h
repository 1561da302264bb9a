// SPDX-License-Identifier: Apache-2.0
// OutageBudget.h — how long `dlock`'s wait for its key rides out a backend it cannot reach (a
// restart, a failover): one budget for the whole wait, however many slices the wait is cut into
// to notice signals. A wait with a deadline (--wait D) has that deadline; a wait without one has
// LockOptions::outageTolerance from the first failure of the outage, as ILock::lock(key) does, and
// an answer from the backend ends the outage. Pure arithmetic on the time points it is given.
// Owner: the waiting call. Thread safety: not thread-safe.
#pragma once

#include <chrono>

namespace dlock::cli {

class OutageBudget {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr Clock::time_point kNone = Clock::time_point::max();

  // `waitDeadline`: the wait's own (kNone: none); `tolerance` bounds an outage of a wait without one.
  OutageBudget(Clock::time_point waitDeadline, std::chrono::milliseconds tolerance) noexcept
      : waitDeadline_(waitDeadline), tolerance_(tolerance) {}

  // A ConnectionError at `now`: until when the wait may go on trying. At or before `now`: the
  // budget is spent, the error ends the wait.
  [[nodiscard]] Clock::time_point failedAt(Clock::time_point now) noexcept {
    if (outageSince_ == kNone) outageSince_ = now;
    return waitDeadline_ != kNone ? waitDeadline_ : outageSince_ + tolerance_;
  }

  // The backend answered: a later outage of an unbounded wait gets a tolerance of its own.
  void answered() noexcept { outageSince_ = kNone; }

  // How long the current outage has lasted at `now` (zero: none).
  [[nodiscard]] Clock::duration outageAt(Clock::time_point now) const noexcept {
    return outageSince_ < now ? now - outageSince_ : Clock::duration::zero();
  }

 private:
  const Clock::time_point waitDeadline_;
  const std::chrono::milliseconds tolerance_;
  Clock::time_point outageSince_ = kNone;
};

}  // namespace dlock::cli
