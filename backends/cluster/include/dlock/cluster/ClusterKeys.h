// SPDX-License-Identifier: Apache-2.0
// ClusterKeys.h — where a lock lives in a Redis Cluster: the CRC16 of the specification, a Redis
// key's hash slot, and a lock's names and slot. The names are those of every topology,
// `<prefix>{<key>}` and its `:fence` and `:released` companions, except for a key starting with
// '}' (see the README's "Key names"). Plain functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dlock {

inline constexpr std::uint16_t kClusterSlots = 16384;

[[nodiscard]] std::uint16_t crc16Xmodem(std::string_view bytes) noexcept;

// CRC16 of the key's hash tag (or of the whole key when it has none) modulo 16384.
[[nodiscard]] std::uint16_t keyHashSlot(std::string_view redisKey) noexcept;

struct ClusterKeyNames {
  std::string lock;        // holds the owner's token
  std::string fence;       // the fencing counter
  std::string channel;     // sharded pub/sub channel of release messages
  std::uint16_t slot = 0;  // the slot of all three
};

// The names of `key` under `prefix` on a cluster; `prefix` must not contain '{' or '}'.
[[nodiscard]] ClusterKeyNames clusterKeyNames(std::string_view prefix, std::string_view key);

}  // namespace dlock
