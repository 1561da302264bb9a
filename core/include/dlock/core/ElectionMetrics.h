// SPDX-License-Identifier: Apache-2.0
// ElectionMetrics.h — dlock::formatElectionMetrics: elections as Prometheus text (the format of
// formatMetrics, Metrics.h), labelled election="<name>": whether this process leads (a gauge),
// and the terms it started and lost (counters).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dlock/core/Election.h"

namespace dlock {

// Several elections' metrics, each family once; ConfigError if two share a name.
[[nodiscard]] std::string formatElectionMetrics(const std::vector<std::shared_ptr<Election>>& elections);

}  // namespace dlock
