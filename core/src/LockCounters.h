// SPDX-License-Identifier: Apache-2.0
// LockCounters.h — the live counters behind ILock::stats(). Thread safety: atomics.
#pragma once

#include <atomic>
#include <cstdint>

#include "dlock/LockStats.h"

namespace dlock::detail {

struct LockCounters {
  std::atomic<std::uint64_t> acquisitions{0};
  std::atomic<std::uint64_t> reentries{0};
  std::atomic<std::uint64_t> failedTries{0};
  std::atomic<std::uint64_t> attempts{0};
  std::atomic<std::uint64_t> outageRetries{0};
  std::atomic<std::int64_t> waitMillis{0};
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
    stats.renewals = renewals.load(std::memory_order_relaxed);
    stats.renewalRoundTrips = renewalRoundTrips.load(std::memory_order_relaxed);
    stats.renewalFailures = renewalFailures.load(std::memory_order_relaxed);
    stats.lostLeases = lostLeases.load(std::memory_order_relaxed);
    return stats;
  }
};

}  // namespace dlock::detail
