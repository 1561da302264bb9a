// SPDX-License-Identifier: Apache-2.0
// Digest.h — SHA-1 as hex, for the EVALSHA digests of our scripts (computed locally, so the
// first call needs no SCRIPT LOAD round trip) and derived hash tags. Not used for anything
// security-related. Self-contained (no OpenSSL): a forked child computes one without any lock.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

[[nodiscard]] std::string sha1Hex(std::string_view data);

// `bytes` in lower-case hex, two digits a byte.
[[nodiscard]] std::string hexOf(std::string_view bytes);

}  // namespace dlock::detail
