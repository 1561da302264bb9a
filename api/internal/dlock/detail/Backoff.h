// SPDX-License-Identifier: Apache-2.0
// Backoff.h — the one back-off schedule of the library: exponential from a first step, capped,
// each pause jittered into [step/2, step] so that callers failing together do not come back
// together. Every pause between tries (a call's retries, a wait riding out an outage, a
// reconnect, a release watch that could not move) is taken from it.
// Owner: the retrying caller. Thread safety: one per caller; not thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace dlock::detail {

class Backoff {
 public:
  using Duration = std::chrono::milliseconds;

  Backoff(Duration first, Duration cap) : first_(std::max(first, Duration(1))), cap_(std::max(cap, first_)), step_(first_) {}

  // The pause before the next try; the step after it doubles, up to the cap.
  Duration next() {
    const Duration pause = jittered(step_);
    step_ = std::min(cap_, step_ * 2);
    return pause;
  }

  // After a success: the next trouble starts again from the first step.
  void reset() noexcept { step_ = first_; }

  // The step (unjittered) after `failures` consecutive failures: 0 for none, then first, 2×first...
  // up to the cap. For a schedule kept as a failure count (a connection pool's).
  [[nodiscard]] static Duration afterFailures(Duration first, Duration cap, unsigned failures) {
    if (failures == 0) return Duration(0);
    return std::min(cap, Duration(first.count() << std::min(failures - 1, 16U)));
  }

 private:
  static Duration jittered(Duration step) {
    thread_local std::minstd_rand random{std::random_device{}()};
    std::uniform_int_distribution<Duration::rep> pick(step.count() - step.count() / 2, step.count());
    return Duration(pick(random));
  }

  const Duration first_;
  const Duration cap_;
  Duration step_;
};

}  // namespace dlock::detail
