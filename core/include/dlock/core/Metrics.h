// SPDX-License-Identifier: Apache-2.0
// Metrics.h — dlock::formatMetrics: locks' stats() as Prometheus text (exposition format 0.0.4),
// counters and a wait-time histogram labelled lock="<name>", for a service to return from the
// /metrics endpoint it already serves. dlock runs no HTTP server.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dlock/ILock.h"
#include "dlock/LockStats.h"

namespace dlock {

// The Content-Type of formatMetrics' text.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// One lock's metrics.
[[nodiscard]] std::string formatMetrics(const ILock& lock);
// Several locks' metrics, each family once; ConfigError if two locks share a name
// (LockBuilder::name), as their series would.
[[nodiscard]] std::string formatMetrics(const std::vector<std::shared_ptr<ILock>>& locks);
// The same from snapshots, for an ILock of one's own or stats taken earlier.
[[nodiscard]] std::string formatMetrics(const std::vector<LockStats>& stats);

}  // namespace dlock
