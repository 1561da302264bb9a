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

// The waits of acquire calls that found the key held: their total and a histogram.
class WaitRecorder {
 public:
  // Records one wait of `millis`, in the total and in its bucket.
  void record(std::int64_t millis) noexcept {
    total_.fetch_add(millis, std::memory_order_relaxed);
    const auto& bounds = WaitHistogram::kBoundsMillis;
    const auto bucket = static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), millis) - bounds.begin());
    buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  }
  [[nodiscard]] std::int64_t total() const noexcept { return total_.load(std::memory_order_relaxed); }

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
  std::atomic<std::uint64_t> handOffs{0};
  std::atomic<std::uint64_t> reentries{0};
  std::atomic<std::uint64_t> failedTries{0};
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> outageRetries{0};
  WaitRecorder waits;
  std::atomic<std::uint64_t> renewals{0};
  std::atomic<std::uint64_t> renewalRoundTrips{0};
  std::atomic<std::uint64_t> renewalFailures{0};
  std::atomic<std::uint64_t> lostLeases{0};

  [[nodiscard]] LockStats snapshot() const {
    LockStats stats;
    stats.acquisitions = acquisitions.load(std::memory_order_relaxed);
    stats.handOffs = handOffs.load(std::memory_order_relaxed);
    stats.reentries = reentries.load(std::memory_order_relaxed);
    stats.failedTries = failedTries.load(std::memory_order_relaxed);
    stats.attempts = attempts.load(std::memory_order_relaxed);
    stats.outageRetries = outageRetries.load(std::memory_order_relaxed);
    stats.waitTime = std::chrono::milliseconds(waits.total());
    stats.waits = waits.histogram();
    stats.renewals = renewals.load(std::memory_order_relaxed);
    stats.renewalRoundTrips = renewalRoundTrips.load(std::memory_order_relaxed);
    stats.renewalFailures = renewalFailures.load(std::memory_order_relaxed);
    stats.lostLeases = lostLeases.load(std::memory_order_relaxed);
    return stats;
  }
};

}  // namespace dlock::detail
