// SPDX-License-Identifier: Apache-2.0
// MemoryKey.h — how a Redlock operator's memories (Suspects, PartialReleases) name one
// (key, token): unambiguous whatever bytes either holds.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

inline std::string memoryKey(std::string_view key, std::string_view token) {
  return std::to_string(key.size()) + ":" + std::string(key) + std::string(token);
}

}  // namespace dlock::detail
