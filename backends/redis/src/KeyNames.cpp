// SPDX-License-Identifier: Apache-2.0
#include "KeyNames.h"

#include <array>

#include "Digest.h"

namespace dlock::detail {
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
constexpr std::uint16_t kSlots = 16384;
constexpr std::size_t kDerivedTagDigits = 16;

}  // namespace

std::uint16_t crc16(std::string_view bytes) noexcept {
  unsigned crc = 0;
  for (const char c : bytes) {
    const unsigned index = ((crc >> 8) ^ static_cast<unsigned char>(c)) & 0xffU;
    crc = ((crc << 8) ^ kCrc16Table[index]) & 0xffffU;
  }
  return static_cast<std::uint16_t>(crc);
}

std::uint16_t hashSlot(std::string_view redisKey) noexcept {
  // The Cluster specification's rule: the first '{', then the first '}' after it; an empty tag
  // (or none) hashes the whole key.
  const auto open = redisKey.find('{');
  if (open != std::string_view::npos) {
    const auto close = redisKey.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) redisKey = redisKey.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(crc16(redisKey) & (kSlots - 1));
}

KeyNames::KeyNames(std::string_view prefix, std::string_view key, bool sharded) {
  if (sharded && !key.empty() && key.front() == '}') {
    head_.reserve(prefix.size() + kDerivedTagDigits + 4);
    head_.append(prefix).append("#{").append(sha1Hex(key).substr(0, kDerivedTagDigits)).append("}:");
    key_ = key;
    lock_ = companion("lock");
    return;
  }
  lock_.reserve(prefix.size() + key.size() + 2);
  lock_.append(prefix).append("{").append(key).append("}");
}

std::string KeyNames::condition(std::string_view part, std::string_view name) const {
  return companion(std::string("cond:").append(part).append(":").append(hexOf(name)));
}

std::string KeyNames::companion(std::string_view role) const {
  std::string name;
  if (head_.empty()) {
    name.reserve(lock_.size() + role.size() + 1);
    name.append(lock_).append(":").append(role);
  } else {
    name.reserve(head_.size() + role.size() + key_.size() + 1);
    name.append(head_).append(role).append(":").append(key_);
  }
  return name;
}

}  // namespace dlock::detail
