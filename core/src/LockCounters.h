// SPDX-License-Identifier: Apache-2.0
// LockCounters.h — the live counters behind ILock::stats(). Thread safety: atomics.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "dlock/LockStats.h"

namespace dlock::detail {

// The waits of acquire calls that found the key held: their total and a histogram. It keeps an
// atomic's fetch_add/load, so the acquire loops' `waitMillis.fetch_add(ms, order)` records one
// wait, total and bucket.
class WaitRecorder {
 public:
  void fetch_add(std::int64_t millis, std::memory_order order) noexcept {
    total_.fetch_add(millis, order);
    const auto& bounds = WaitHistogram::kBoundsMillis;
    const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), millis) - bounds.begin());
    buckets_[bucket].fetch_add(1, order);
  }
  [[nodiscard]] std::int64_t load(std::memory_order order) const noexcept { return total_.load(order); }

  [[nodiscard]] WaitHistogram histogram() const noexcept {
    WaitHistogram histogram;
    for (std::size_t i = 0; i < buckets_.size(); ++i) histogram.counts[i] = buckets_[i].load(std::memory_order_relaxed);
    return histogram;
  }

 private:
  std::atomic<std::int64_t> total_{0};
  std::array<std::atomic<std::uint64_t>, WaitHistogram::kBoundsMillis.size() + 1> buckets_{};
};

struct LockCounters {
  std::atomic<std::uint64_t> acquisitions{0};
  std::atomic<std::uint64_t> reentries{0};
  std::atomic<std::uint64_t> failedTries{0};
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> outageRetries{0};
  WaitRecorder waitMillis;
  std::atomic<std::uint64_t> renewals{0};
  std::atomic<std::uint64_t> renewalRoundTrips{0};
  std::atomic<std::uint64_t> renewalFailures{0};
  std::atomic<std::uint64_t> lostLeases{0};

  [[nodiscard]] LockStats snapshot() const {
    LockStats stats;
    stats.acquisitions = acquisitions.load(std::memory_order_relaxed);
    stats.reentries = reentries.load(std::memory_order_relaxed);
    stats.failedTries = failedTries.load(std::memory_order_relaxed);
    stats.attempts = attempts.load(std::memory_order_relaxed);
    stats.outageRetries = outageRetries.load(std::memory_order_relaxed);
    stats.waitTime = std::chrono::milliseconds(waitMillis.load(std::memory_order_relaxed));
    stats.waits = waitMillis.histogram();
    stats.renewals = renewals.load(std::memory_order_relaxed);
    stats.renewalRoundTrips = renewalRoundTrips.load(std::memory_order_relaxed);
    stats.renewalFailures = renewalFailures.load(std::memory_order_relaxed);
    stats.lostLeases = lostLeases.load(std::memory_order_relaxed);
    return stats;
  }
};

}  // namespace dlock::detail
