// SPDX-License-Identifier: Apache-2.0
// Validation.h — the input rules every entry point applies before anything reaches a backend:
// keys are non-empty byte strings of at most kMaxKeyBytes (any bytes: '\0', "\r\n", '{', '%'),
// and lease times are positive and at most kMaxLeaseTime. Also quoteKey(), which renders a key
// for messages, and quoteText(), which renders any user text.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "dlock/LockError.h"

namespace dlock {

// Longest user key, in bytes. Redis allows far more; a lock name longer than this is a bug.
inline constexpr std::size_t kMaxKeyBytes = 1024;

// Longest lease (LockOptions::leaseTime and watchdogLease, AcquireOptions::leaseTime, the lease of
// tryLock): 365 days. Redis refuses a PX/PEXPIRE whose expiry (now + ttl, in milliseconds since
// 1970) passes its own limit, and the lock keeps deadlines in nanoseconds of the steady clock,
// which overflow about 292 years after boot; a year stays far from both. A lease longer than
// that is a bug, as an oversized key is. Wait times have no limit (a long wait is "forever").
inline constexpr std::chrono::milliseconds kMaxLeaseTime = std::chrono::hours(24 * 365);

// The largest fencing token: counters are Redis integers (signed 64 bits), and a token never
// repeats or goes back, so none is issued above this.
inline constexpr std::uint64_t kMaxFencingToken = 9223372036854775807ULL;

// Longest owner label a backend records (IOwnerRecorder): text for people reading `dlock status`,
// not a payload. LockBuilder::ownerLabel's own text may have kMaxOwnerTextBytes of it; the host
// name and process id it adds fit in the rest.
inline constexpr std::size_t kMaxOwnerLabelBytes = 512;
inline constexpr std::size_t kMaxOwnerTextBytes = 256;

namespace detail {

// Text as it appears in messages: quoted, non-printable bytes as \xNN, shortened after `shown`
// bytes.
inline std::string quoteText(std::string_view text, std::size_t shown) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < shown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  if (text.size() > shown) out += "...";
  out += "'";
  return out;
}

// A key as it appears in messages: quoteText, long keys shortened.
inline std::string quoteKey(std::string_view key) { return quoteText(key, 80); }

inline void checkKey(std::string_view key, const char* operation) {
  if (key.empty()) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + ": the key is empty");
  }
  if (key.size() > kMaxKeyBytes) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + " " + quoteKey(key) + ": the key has " +
                               std::to_string(key.size()) + " bytes, more than the limit of " +
                               std::to_string(kMaxKeyBytes));
  }
}

inline void checkOwnerLabel(std::string_view label, const char* operation) {
  if (label.size() > kMaxOwnerLabelBytes) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + ": the owner label has " +
                               std::to_string(label.size()) + " bytes, more than the limit of " +
                               std::to_string(kMaxOwnerLabelBytes));
  }
}

inline void checkPositive(std::chrono::milliseconds duration, const char* what, const char* operation) {
  if (duration.count() <= 0) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + ": " + what + " must be positive, got " +
                               std::to_string(duration.count()) + "ms");
  }
}

// A lease time: positive and at most kMaxLeaseTime.
inline void checkLeaseTime(std::chrono::milliseconds lease, const char* what, const char* operation) {
  checkPositive(lease, what, operation);
  if (lease > kMaxLeaseTime) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + ": " + what + " of " +
                               std::to_string(lease.count()) + "ms is longer than the limit of " +
                               std::to_string(kMaxLeaseTime.count()) + "ms (dlock::kMaxLeaseTime)");
  }
}

// A token as backends store it beside others in one value (a queue place, a message): 1 to
// kMaxTokenBytes letters, digits or '-' (hex, a UUID). Nobody guesses one; its bytes are plain.
inline constexpr std::size_t kMaxTokenBytes = 128;
inline void checkToken(std::string_view token, const char* operation) {
  bool plain = !token.empty() && token.size() <= kMaxTokenBytes;
  for (const char c : token) {
    plain = plain && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-');
  }
  if (!plain) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + ": the token " + quoteText(token, 40) +
                               " is not 1 to " + std::to_string(kMaxTokenBytes) + " letters, digits or '-'");
  }
}

// A fencing counter to raise to: at most kMaxFencingToken.
inline void checkFencingToken(std::uint64_t token, const char* operation) {
  if (token > kMaxFencingToken) {
    throw InvalidArgumentError(std::string("dlock: ") + operation + ": " + std::to_string(token) +
                               " is above the largest fencing token, 2^63 - 1 (dlock::kMaxFencingToken)");
  }
}

}  // namespace detail
}  // namespace dlock
