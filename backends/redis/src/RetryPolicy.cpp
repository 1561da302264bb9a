// SPDX-License-Identifier: Apache-2.0
#include "RetryPolicy.h"

#include <algorithm>

#include "dlock/detail/CallBudget.h"

namespace dlock::detail {

namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The pauses of a call: short, since a call's budget is about a second; a wait that rides out a
// longer outage pauses in LockCore (OutageRetry.h), from the same schedule.
constexpr milliseconds kFirstPause{5};
constexpr milliseconds kMaxPause{100};

}  // namespace

RetryPolicy::RetryPolicy(milliseconds budget)
    : budget_(budget),
      // A call inside a timed wait retries no longer than the wait has left (CallBudget.h).
      deadline_(std::min(Steady::now() + budget, CallBudget::current())),
      backoff_(kFirstPause, kMaxPause) {}

RetryPolicy::Step RetryPolicy::withinBudget(Step step) {
  const auto now = Steady::now();
  if (step == Step::AfterPause) {
    // The pause ends by the deadline, where the last retry goes; none is shorter than 1 ms (a
    // remainder below that would be a retry without a pause).
    const auto left = std::chrono::duration_cast<milliseconds>(deadline_ - now);
    pause_ = std::min(backoff_.next(), left);
    if (pause_ >= milliseconds(1)) return step;
  } else if (now < deadline_) {
    return step;
  }
  reason_ = " (retried for " + std::to_string(budget_.count()) + " ms)";
  return Step::GiveUp;
}

RetryPolicy::Step RetryPolicy::afterReply(Next next, bool asking) {
  reason_.clear();
  switch (next) {
    case Next::Final:
      return Step::GiveUp;
    case Next::Redirected:
      if (asking && subscribing_) {
        reason_ = ": the slot is moving";
        return Step::GiveUp;
      }
      if (++redirects_ > kMaxRedirects) {
        reason_ = ": more than " + std::to_string(kMaxRedirects) + " redirections";
        return Step::GiveUp;
      }
      return Step::Now;
    case Next::Moved:
      return withinBudget(Step::Now);
    case Next::Unchanged:
      return withinBudget(Step::AfterPause);
  }
  return Step::GiveUp;
}

RetryPolicy::Step RetryPolicy::afterFailure(Failure failure, Next next) {
  reason_.clear();
  if (failure == Failure::Stale && !staleReplaced_) {
    staleReplaced_ = true;  // the server restarted while the connection sat idle: nothing ran
    return Step::Now;
  }
  // A node that failed and has not moved: nowhere to go within one call. A wait rides out the
  // outage a level up (OutageRetry.h), where its own budget is known.
  if (next != Next::Moved) return Step::GiveUp;
  return withinBudget(Step::Now);
}

RetryPolicy::Step RetryPolicy::whenNowhere() {
  reason_.clear();
  return withinBudget(Step::AfterPause);
}

}  // namespace dlock::detail
