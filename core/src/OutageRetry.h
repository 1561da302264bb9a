// SPDX-License-Identifier: Apache-2.0
// OutageRetry.h — how a wait rides out a backend it cannot reach (a failover, a restart): after a
// ConnectionError the attempt is repeated after a capped, jittered exponential back-off (10 ms
// doubling to 500 ms), as long as the retry still fits the budget: the wait's own deadline, or
// for a wait without one (lock(key)) LockOptions::outageTolerance from the first failure. When the
// budget ends with the backend still unreachable, the ConnectionError names the last cause and how
// long it tried. One per wait. Owner: the waiting call. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <algorithm>
#include <random>
#include <string>
#include <thread>

#include "dlock/ILock.h"
#include "dlock/LockError.h"

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
    std::uniform_int_distribution<long long> jitter(backoff_.count() / 2, backoff_.count());
    const std::chrono::milliseconds pause(jitter(random_));
    if (now + pause >= deadline_) {
      throw ConnectionError(what + ": the backend stayed unreachable for " +
                            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - started_).count()) +
                            " ms over " + std::to_string(failures_) + " attempt(s); last: " + error.what());
    }
    std::this_thread::sleep_for(pause);
    backoff_ = std::min(backoff_ * 2, kMaxBackoff);
  }

  [[nodiscard]] unsigned failures() const noexcept { return failures_; }

 private:
  static constexpr std::chrono::milliseconds kFirstBackoff{10};
  static constexpr std::chrono::milliseconds kMaxBackoff{500};

  const std::chrono::steady_clock::time_point started_;
  const Deadline deadline_;
  std::chrono::milliseconds backoff_ = kFirstBackoff;
  unsigned failures_ = 0;
  std::minstd_rand random_{std::random_device{}()};
};

}  // namespace dlock::detail
