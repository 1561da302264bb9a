// Timeline.h — a run drawn as an SVG (no dependencies): one lane per key, each hold a bar
// coloured by client from acquire to release (or to the client's last record when it died), lost
// notices and LockLostError releases marked on the bar, fault windows shaded and named, a time
// axis in seconds from the first record. Overlapping holds of one key stack in the lane, which is
// where a broken lock shows.
#pragma once

#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

[[nodiscard]] std::string timelineSvg(const std::vector<Op>& history);

// Writes timelineSvg(history) to `path`; std::runtime_error when it cannot.
void writeTimeline(const std::string& path, const std::vector<Op>& history);

}  // namespace dlock::nemesis
