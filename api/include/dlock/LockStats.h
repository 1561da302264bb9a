// SPDX-License-Identifier: Apache-2.0
// LockStats.h — counters of one lock since it was built (LockStats), with the waits' durations
// (WaitHistogram). Plain values: a snapshot from ILock::stats(); dlock::formatMetrics prints them.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>

namespace dlock {

// The acquire calls that found the key held, by how long each waited (until it held the key or
// timed out; a call that tries once waits 0 ms).
struct WaitHistogram {
  // Upper bounds of the buckets, inclusive, in ms; the bucket after the last takes longer waits.
  static constexpr std::array<std::int64_t, 13> kBoundsMillis{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000,
                                                              10000, 30000};
  std::array<std::uint64_t, kBoundsMillis.size() + 1> counts{};  // per bucket, not cumulative

  [[nodiscard]] std::uint64_t count() const noexcept {
    std::uint64_t total = 0;
    for (const std::uint64_t n : counts) total += n;
    return total;
  }
};

struct LockStats {
  std::string name;                        // the lock's name (LockBuilder::name), its metrics' label
  std::uint64_t acquisitions = 0;          // successful acquisitions; reentrant ones not counted
  std::uint64_t handOffs = 0;              // the acquisitions that followed a wait for a key held by another
  std::uint64_t reentries = 0;             // acquisitions of a key this thread already held
  std::uint64_t failedTries = 0;           // tryLock/acquire calls that timed out
  std::uint64_t attempts = 0;              // acquire calls to the backend, failed ones included
  std::uint64_t outageRetries = 0;         // attempts retried inside a wait after a ConnectionError
  std::chrono::milliseconds waitTime{0};   // time spent waiting for keys held by others
  WaitHistogram waits;                     // the same waits, one per acquire call that found the key held
  std::uint64_t renewals = 0;              // leases extended by the watchdog
  std::uint64_t renewalRoundTrips = 0;     // watchdog batch calls to the backend
  std::uint64_t renewalFailures = 0;       // watchdog batches that failed with a backend error
  std::uint64_t lostLeases = 0;            // leases found lost (watchdog, unlock, or local expiry)
};

}  // namespace dlock
