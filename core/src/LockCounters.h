// SPDX-License-Identifier: Apache-2.0
// LockCounters.h — the live counters behind ILock::stats(), and its gauges (what this process
// has now). Thread safety: atomics.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "FixedHolds.h"
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

// The number of LeaseKind values (LeaseState.h), which index the gauges.
inline constexpr std::size_t kLeaseKinds = 5;

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
  // Gauges by LeaseKind: leases held now (LeaseState::countIn; a semaphore's weighted by its
  // permits), and threads inside an acquire that waits (CountedWait).
  std::array<std::atomic<std::int64_t>, kLeaseKinds> held{};
  std::array<std::atomic<std::int64_t>, kLeaseKinds> waiting{};
  // The fixed-lease holds among `held`, left out of heldAt() once past their local deadline.
  FixedHolds fixed;

  // The held gauge of `kind` at `now` (the lock's clock): a fixed lease that ran out unseen is
  // no longer counted, whether or not an unlock or extend has found it lost yet.
  [[nodiscard]] std::uint64_t heldAt(std::size_t kind, Clock::time_point now) const {
    return fixed.count(kind, now, held);
  }

  // A gauge's value now (never negative: a lease is counted before it can end).
  [[nodiscard]] static std::uint64_t gauge(const std::atomic<std::int64_t>& value) noexcept {
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, value.load(std::memory_order_relaxed)));
  }

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

// Counts the calling thread in a waiting gauge for its lifetime; `counted` false (a one-time
// try, which does not wait) counts nothing.
class CountedWait {
 public:
  CountedWait(std::atomic<std::int64_t>& gauge, bool counted) noexcept : gauge_(counted ? &gauge : nullptr) {
    if (gauge_ != nullptr) gauge_->fetch_add(1, std::memory_order_relaxed);
  }
  CountedWait(const CountedWait&) = delete;
  CountedWait& operator=(const CountedWait&) = delete;
  ~CountedWait() {
    if (gauge_ != nullptr) gauge_->fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t>* const gauge_;
};

}  // namespace dlock::detail
