// SPDX-License-Identifier: Apache-2.0
// Metrics.h — dlock::formatMetrics: locks' and semaphores' stats() as Prometheus text (exposition
// format 0.0.4), for a service to return from the /metrics endpoint it already serves. dlock runs
// no HTTP server. Every series is labelled lock="<name>":
//   counters    dlock_acquisitions_total ... dlock_lost_leases_total, and dlock_wait_seconds (a
//               histogram); a read-write lock's count both its sides
//   gauges      dlock_holds, dlock_waiting_threads (a read-write lock's with side="read" and
//               side="write"), dlock_semaphore_permits_in_use, dlock_semaphore_capacity
// The gauges are this process's, so a sum over processes is the whole deployment's.
// dlock::Client's overload (dlock/Client.h) prints everything a client handed out.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dlock/ILock.h"
#include "dlock/LockStats.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/Semaphore.h"

namespace dlock {

// The Content-Type of formatMetrics' text.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// One lock's metrics.
[[nodiscard]] std::string formatMetrics(const ILock& lock);
// One read-write lock's: its counters once, its gauges per side.
[[nodiscard]] std::string formatMetrics(const ReadWriteLock& lock);
// One semaphore's.
[[nodiscard]] std::string formatMetrics(const Semaphore& semaphore);
// Several locks' metrics, each family once; ConfigError if two locks share a name
// (LockBuilder::name, a semaphore's name), as their series would: a read-write lock's two sides
// share theirs, so give the ReadWriteLock's stats once.
[[nodiscard]] std::string formatMetrics(const std::vector<std::shared_ptr<ILock>>& locks);
// The same from snapshots, for an ILock of one's own or stats taken earlier.
[[nodiscard]] std::string formatMetrics(const std::vector<LockStats>& stats);

}  // namespace dlock
