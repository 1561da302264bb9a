// SPDX-License-Identifier: Apache-2.0
#include "dlock/duration.h"

#include <cstdint>

namespace dlock {
namespace {

using std::chrono::milliseconds;

// A unit's length in microseconds; 0 for an unknown unit.
std::uint64_t unitMicros(std::string_view unit, BareNumber bare) {
  if (unit == "us") return 1;
  if (unit == "ms") return 1'000;
  if (unit == "s") return 1'000'000;
  if (unit == "m") return 60'000'000;
  if (unit == "h") return 3'600'000'000ULL;
  if (unit.empty() && bare == BareNumber::Seconds) return 1'000'000;
  return 0;
}

bool isDigit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace

bool isBareNumber(std::string_view text) noexcept {
  bool digits = false;
  bool point = false;
  for (const char c : text) {
    if (isDigit(c)) {
      digits = true;
    } else if (c == '.' && !point) {
      point = true;
    } else {
      return false;
    }
  }
  return digits;
}

std::optional<milliseconds> parseDuration(std::string_view text, BareNumber bare, milliseconds limit) {
  // Number: digits with an optional fraction; then the unit.
  std::size_t i = 0;
  std::uint64_t whole = 0;
  std::uint64_t fraction = 0;
  std::uint64_t fractionScale = 1;
  std::size_t digits = 0;
  for (; i < text.size() && isDigit(text[i]); ++i, ++digits) {
    whole = whole * 10 + static_cast<std::uint64_t>(text[i] - '0');
    if (whole > 1'000'000'000'000ULL) return std::nullopt;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    std::size_t fractionDigits = 0;
    for (; i < text.size() && isDigit(text[i]); ++i, ++fractionDigits) {
      if (fractionDigits < 9) {  // beyond a nanosecond, further digits no longer matter
        fraction = fraction * 10 + static_cast<std::uint64_t>(text[i] - '0');
        fractionScale *= 10;
      }
    }
    if (fractionDigits == 0) return std::nullopt;
    digits += fractionDigits;
  }
  if (digits == 0 || limit.count() < 0) return std::nullopt;
  const std::uint64_t unit = unitMicros(text.substr(i), bare);
  if (unit == 0) return std::nullopt;
  const auto limitMicros = static_cast<std::uint64_t>(limit.count()) * 1000;
  if (whole > limitMicros / unit) return std::nullopt;
  // Microseconds, the fraction rounded up; then milliseconds, rounded up.
  const std::uint64_t micros = whole * unit + (fraction * unit + fractionScale - 1) / fractionScale;
  const std::uint64_t millis = (micros + 999) / 1000;
  if (millis > static_cast<std::uint64_t>(limit.count())) return std::nullopt;
  return milliseconds(static_cast<milliseconds::rep>(millis));
}

}  // namespace dlock
