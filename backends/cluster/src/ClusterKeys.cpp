#include "dlock/cluster/ClusterKeys.h"

#include <array>

#include "Sha1.h"

namespace dlock {
namespace {

constexpr std::array<std::uint16_t, 256> makeCrc16Table() {
  std::array<std::uint16_t, 256> table{};
  for (unsigned byte = 0; byte < 256; ++byte) {
    unsigned crc = byte << 8;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 0x8000U) != 0 ? (crc << 1) ^ 0x1021U : crc << 1;
    table[byte] = static_cast<std::uint16_t>(crc & 0xffffU);
  }
  return table;
}

constexpr std::array<std::uint16_t, 256> kCrc16Table = makeCrc16Table();

// 16 hex digits of the SHA-1 of the key: the derived hash tag of keys with braces.
constexpr std::size_t kDerivedTagDigits = 16;

}  // namespace

std::uint16_t crc16Xmodem(std::string_view bytes) noexcept {
  unsigned crc = 0;
  for (const char c : bytes) {
    const unsigned index = ((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xffU;
    crc = ((crc << 8) ^ kCrc16Table[index]) & 0xffffU;
  }
  return static_cast<std::uint16_t>(crc);
}

std::uint16_t keyHashSlot(std::string_view redisKey) noexcept {
  // The Cluster specification's rule: the first '{', then the first '}' after it; an empty tag
  // (or none) hashes the whole key.
  const auto open = redisKey.find('{');
  if (open != std::string_view::npos) {
    const auto close = redisKey.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      redisKey = redisKey.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16Xmodem(redisKey) & (kClusterSlots - 1));
}

ClusterKeyNames clusterKeyNames(std::string_view prefix, std::string_view key) {
  ClusterKeyNames names;
  if (key.find_first_of("{}") == std::string_view::npos) {
    names.lock.reserve(prefix.size() + key.size() + 2);
    names.lock.append(prefix).append("{").append(key).append("}");
    names.fence = names.lock + ":fence";
    names.channel = names.lock + ":released";
    names.slot = keyHashSlot(names.lock);
    return names;
  }
  const std::string tag = "#" + detail::sha1Hex(key).substr(0, kDerivedTagDigits);
  std::string base;
  base.reserve(prefix.size() + tag.size() + 2);
  base.append(prefix).append("{").append(tag).append("}");
  names.lock = base + ":lock:";
  names.lock.append(key);
  names.fence = base + ":fence:";
  names.fence.append(key);
  names.channel = base + ":released:";
  names.channel.append(key);
  names.slot = keyHashSlot(names.lock);
  return names;
}

}  // namespace dlock
