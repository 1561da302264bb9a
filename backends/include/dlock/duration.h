// SPDX-License-Identifier: Apache-2.0
// duration.h — the one reader of durations written as text, for URIs and the dlock command.
//
//   parseDuration(text, bare)   "500ms", "2s", "1m", "1.5h", "250us" → milliseconds
//
// Units: us, ms, s, m, h; a decimal fraction is allowed ("1.5s"). A bare number is refused in a
// URI (BareNumber::Refused: "1" could mean a second or a millisecond, so say which) and means
// seconds on the dlock command line, as flock(1) -w and timeout(1) take it.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace dlock {

enum class BareNumber {
  Refused,  // a number without a unit is malformed
  Seconds,  // a number without a unit is seconds
};

// `text` as a duration, rounded up to whole milliseconds (so "1us" is 1ms and never zero); nullopt
// when malformed (or a bare number under BareNumber::Refused), negative, or longer than `limit`.
// Zero is returned as zero: callers that need a positive duration check it.
[[nodiscard]] std::optional<std::chrono::milliseconds> parseDuration(
    std::string_view text, BareNumber bare,
    std::chrono::milliseconds limit = std::chrono::hours(24 * 365));

// True when `text` is a number without a unit ("1", "2.5"): the mistake a URI's error names.
[[nodiscard]] bool isBareNumber(std::string_view text) noexcept;

}  // namespace dlock
