// ClusterKeys.h — where a lock lives in a Redis Cluster.
//
//   crc16Xmodem(bytes)              CRC16-CCITT (XMODEM): poly 0x1021, init 0, no reflection —
//                                   the key hash of the Redis Cluster specification
//   keyHashSlot(redisKey)           the hash slot (0..16383) of a Redis key, hash tags included
//   clusterKeyNames(prefix, key)    the Redis names of one lock and their slot
//
// Hash tags. Redis hashes only the part of a key between the first '{' and the first '}' after
// it, when that part is not empty. dlock names a lock `<prefix>{<key>}` so that its companions
// (`…:fence`, `…:released`) carry the same tag and one script touches one slot. A user key is
// any byte string, though, and braces inside it change which part Redis hashes: `}x` gives
// `dlock:{}x}`, whose tag is empty, so Redis hashes the whole name and the lock and its fence
// land in different slots (CROSSSLOT); `a}b` would hash only `a`. So:
//
//   key without '{' or '}'   `<prefix>{<key>}`, `<prefix>{<key>}:fence`, `<prefix>{<key>}:released`
//                            (the names of the single-server backend); the tag is the key.
//   key with '{' or '}'      `<prefix>{#<h>}:lock:<key>`, `<prefix>{#<h>}:fence:<key>`,
//                            `<prefix>{#<h>}:released:<key>`, where <h> is 16 hex digits of the
//                            SHA-1 of the whole key: a tag without braces, derived from every
//                            byte, shared by the three names.
//
// Every name contains the whole key, so two keys never share a name; a brace-free key's names
// cannot take the second form (that would put a '}' in the key). The prefix must not contain
// braces (ClusterOperator refuses it with ConfigError): it comes first and would capture the tag.
// Plain functions; thread-safe.
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

// The names of `key` under `prefix` (see above); `prefix` must not contain '{' or '}'.
[[nodiscard]] ClusterKeyNames clusterKeyNames(std::string_view prefix, std::string_view key);

}  // namespace dlock
