// SPDX-License-Identifier: Apache-2.0
#include "dlock/cluster/ClusterKeys.h"

#include "redis/src/KeyNames.h"

namespace dlock {

std::uint16_t crc16Xmodem(std::string_view bytes) noexcept { return detail::crc16(bytes); }

std::uint16_t keyHashSlot(std::string_view redisKey) noexcept { return detail::hashSlot(redisKey); }

ClusterKeyNames clusterKeyNames(std::string_view prefix, std::string_view key) {
  const detail::KeyNames names(prefix, key, true);
  return ClusterKeyNames{names.lock(), names.fence(), names.channel(), names.slot()};
}

}  // namespace dlock
