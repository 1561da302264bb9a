// SPDX-License-Identifier: Apache-2.0
// OutageRetry.h — how a wait rides out a backend it cannot reach (a failover, a restart): after a
// ConnectionError the attempt is repeated after a capped, jittered exponential back-off (10 ms
// doubling to 500 ms), as long as the retry still fits the budget: the wait's own deadline, or
// for a wait without one (lock(key)) LockOptions::outageTolerance from the first failure. When the
// budget ends with the backend still unreachable, the ConnectionError names the last cause and how
// long it tried. One per wait. Owner: the waiting call. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <thread>

#include "dlock/ILock.h"
#include "dlock/LockError.h"
#include "dlock/detail/Backoff.h"

namespace dlock::detail {

class OutageRetry {
 public:
  using Deadline = ILock::Deadline;

  // `waitDeadline`: the wait's (ILock::kNoDeadline for none); `tolerance` bounds a wait without one.
  OutageRetry(Deadline waitDeadline, std::chrono::milliseconds tolerance)
      : started_(std::chrono::steady_clock::now()),
        deadline_(waitDeadline != Deadline::max() ? waitDeadline : started_ + tolerance) {}

  // After `error`: sleeps the back-off and returns when another attempt fits the budget; throws
  // ConnectionError (`what` names the operation, key and backend) when it does not.
  void pauseOrThrow(const ConnectionError& error, const std::string& what) {
    ++failures_;
    const auto now = std::chrono::steady_clock::now();
    const std::chrono::milliseconds pause = backoff_.next();
    if (now + pause >= deadline_) {
      throw ConnectionError(what + ": the backend stayed unreachable for " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - started_).count()) +
                            " ms over " + std::to_string(failures_) + " attempt(s); last: " + error.what());
    }
    std::this_thread::sleep_for(pause);
  }

  [[nodiscard]] unsigned failures() const noexcept { return failures_; }

 private:
  const std::chrono::steady_clock::time_point started_;
  const Deadline deadline_;
  Backoff backoff_{std::chrono::milliseconds(10), std::chrono::milliseconds(500)};
  unsigned failures_ = 0;
};

}  // namespace dlock::detail
