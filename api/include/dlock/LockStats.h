// SPDX-License-Identifier: Apache-2.0
// LockStats.h — counters of one lock since it was built (LockStats), with the waits' durations
// (WaitHistogram), and gauges of what this process has through it now. Plain values: a snapshot
// from ILock::stats() or Semaphore::stats(); dlock::formatMetrics prints them.
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

// What the stats are of, for the gauges formatMetrics prints.
enum class StatsKind : std::uint8_t { Lock, ReadWrite, Semaphore };

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

  // Gauges: this process, when the snapshot was taken. A hold counts from its acquisition until
  // it is released, lost or given up; a thread waits from an acquire's first try (a one-time
  // try does not wait) until it holds or gives up, a Condition's re-acquire included.
  StatsKind kind = StatsKind::Lock;
  std::uint64_t holds = 0;         // holds now: thread holds (a reentrant key once) and Leases (a read-write lock's writes)
  std::uint64_t waiting = 0;       // threads waiting now (a read-write lock's: for the write lock)
  std::uint64_t readHolds = 0;     // a read-write lock's read holds now
  std::uint64_t readWaiting = 0;   // a read-write lock's threads waiting for the read lock now
  std::uint64_t permitsInUse = 0;  // a semaphore's permits this process holds now
  std::uint32_t capacity = 0;      // a semaphore's capacity, as this object knows it
};

}  // namespace dlock
