// SPDX-License-Identifier: Apache-2.0
// Timeline.h — a run drawn as an SVG (no dependencies): one lane per key, each hold a bar
// coloured by client from its acquire to its release's invoke (or to the client's last record,
// dashed, when it died) and a thin tail for the release's round trip; lost notices and
// LockLostError releases marked, fault windows shaded and named, a time axis in seconds from the
// first record. Holds of one key that overlap stack in the lane, which is where a broken lock shows.
#pragma once

#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

[[nodiscard]] std::string timelineSvg(const std::vector<Op>& history);

// Writes timelineSvg(history) to `path`; std::runtime_error when it cannot.
void writeTimeline(const std::string& path, const std::vector<Op>& history);

}  // namespace dlock::nemesis
