// SPDX-License-Identifier: Apache-2.0
// OutageRetry.h — how a wait rides out a backend it cannot reach (a failover, a restart): after a
// ConnectionError the attempt is repeated after a capped, jittered exponential back-off (10 ms
// doubling to 500 ms) within the budget: the wait's own deadline, or for a wait without one
// (lock(key)) LockOptions::outageTolerance from the first failure. A pause that would end past
// the budget is cut to end at it, and one last attempt is made there: a wait never gives up while
// it has budget left, nor on a failure remembered from before. After that last attempt the
// ConnectionError names the last cause and how long it tried. One per outage, kept by WaitPolicy.
// Owner: the waiting call. Thread safety: not thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "dlock/ILock.h"
#include "dlock/LockError.h"
#include "dlock/detail/Backoff.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

class OutageRetry {
 public:
  using Deadline = ILock::Deadline;

  // `waitDeadline`: the wait's (ILock::kNoDeadline for none); `tolerance` bounds a wait without
  // one, from `since`: when the attempt that failed first was sent.
  OutageRetry(Deadline waitDeadline, std::chrono::milliseconds tolerance,
              std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now())
      : started_(since),
        deadline_(waitDeadline != Deadline::max() ? waitDeadline : started_ + tolerance) {}

  // After `error`: sleeps the back-off (cut to the budget's end) and returns when another attempt
  // is due; throws ConnectionError (`what` names the operation, key and backend) when the failed
  // attempt ended at the budget's end or later.
  // `now` is on the clock the deadlines are (the wait's).
  void pauseOrThrow(const ConnectionError& error, const std::string& what,
                    std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    ++failures_;
    if (now >= deadline_) {
      throw ConnectionError(what + ": the backend stayed unreachable for " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - started_).count()) +
                            " ms over " + std::to_string(failures_) + " attempt(s); last: " + error.what());
    }
    (void)Wakeup::sleepUntil(std::min(now + backoff_.next(), deadline_));
  }

  // The budget's end: calls made in the wait from now on must not outlast it (CallBudget).
  [[nodiscard]] Deadline deadline() const noexcept { return deadline_; }
  [[nodiscard]] unsigned failures() const noexcept { return failures_; }

 private:
  const std::chrono::steady_clock::time_point started_;
  const Deadline deadline_;
  Backoff backoff_{std::chrono::milliseconds(10), std::chrono::milliseconds(500)};
  unsigned failures_ = 0;
};

}  // namespace dlock::detail
