// SPDX-License-Identifier: Apache-2.0
// LockStats.h — counters of one lock since it was built. A plain snapshot from ILock::stats().
#pragma once

#include <chrono>
#include <cstdint>

namespace dlock {

struct LockStats {
  std::uint64_t acquisitions = 0;          // successful acquisitions; reentrant ones not counted
  std::uint64_t reentries = 0;             // acquisitions of a key this thread already held
  std::uint64_t failedTries = 0;           // tryLock/acquire calls that timed out
  std::uint64_t attempts = 0;              // acquire calls to the backend, failed ones included
  std::uint64_t outageRetries = 0;         // attempts retried inside a wait after a ConnectionError
  std::chrono::milliseconds waitTime{0};   // time spent waiting for keys held by others
  std::uint64_t renewals = 0;              // leases extended by the watchdog
  std::uint64_t renewalRoundTrips = 0;     // watchdog batch calls to the backend
  std::uint64_t renewalFailures = 0;       // watchdog batches that failed with a backend error
  std::uint64_t lostLeases = 0;            // leases found lost (watchdog, unlock, or local expiry)
};

}  // namespace dlock
