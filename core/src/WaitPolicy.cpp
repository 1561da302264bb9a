// SPDX-License-Identifier: Apache-2.0
#include "WaitPolicy.h"
#include "dlock/detail/Wakeup.h"

#include <algorithm>
#include <thread>

namespace dlock::detail {

using std::chrono::milliseconds;

milliseconds WaitPolicy::remaining(SteadyTime now) const noexcept {
  if (deadline_ == Deadline::max()) return milliseconds::max();
  const Deadline last = lastAttemptAt();
  if (now >= last) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(last - now);
}

void WaitPolicy::rideOut(const ConnectionError& error, const std::string& what) {
  if (!outage_) outage_.emplace(deadline_, outageTolerance_, sentOnClock_);
  listen();  // the back-off ends on a cancel too, the first try's included
  outage_->pauseOrThrow(error, what, now());
}

WaitPolicy::Deadline WaitPolicy::onWaitClock(Deadline deadline, Clock* clock) {
  if (clock == nullptr || deadline == kTryOnce || deadline == Deadline::max()) return deadline;
  const milliseconds left = std::chrono::ceil<milliseconds>(deadline - std::chrono::steady_clock::now());
  const SteadyTime now = clock->now();
  if (left >= std::chrono::duration_cast<milliseconds>(Deadline::max() - now)) return Deadline::max();
  return now + std::max(left, milliseconds(0));
}

WaitPolicy::SteadyTime WaitPolicy::inRealTime(SteadyTime onClock) const noexcept {
  if (clock_ == nullptr || onClock == SteadyTime::max()) return onClock;
  const SteadyTime clockNow = clock_->now();
  const SteadyTime realNow = std::chrono::steady_clock::now();
  if (onClock <= clockNow) return realNow;
  const SteadyTime::duration left = onClock - clockNow;
  return left >= SteadyTime::max() - realNow ? SteadyTime::max() : realNow + left;
}

milliseconds WaitPolicy::pauseAfter(milliseconds holderTtl, milliseconds placeRenewal, SteadyTime now) const noexcept {
  milliseconds pause = std::min(remaining(now), placeRenewal);
  if (holderTtl.count() > 0) pause = std::min(pause, holderTtl + milliseconds(1));
  return std::max(pause, milliseconds(1));
}

void WaitPolicy::holdBack(SteadyTime until) {
  if (once()) return;
  until = std::min(until, inRealTime(deadline_));
  if (until <= std::chrono::steady_clock::now()) return;
  listen();
  (void)Wakeup::sleepUntilSteady(until);
}

void WaitPolicy::throwInterrupted(const std::string& what) const {
  throw InterruptedError(what + (interrupts_.caller.cancelRequested() ? ": cancelled" : ": the lock was closed") +
                         "; nothing is held");
}

void WaitPolicy::listen() {
  // On a clock of its own a wait always registers: its pauses sleep on that clock.
  if (listening_ || (clock_ == nullptr && !interrupts_.caller.cancellable() && !interrupts_.closing.cancellable())) {
    return;
  }
  listening_ = std::make_unique<Listening>(interrupts_, clock_);
}

}  // namespace dlock::detail
