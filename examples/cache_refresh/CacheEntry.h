// SPDX-License-Identifier: Apache-2.0
// CacheEntry.h — the cache entry both cache-refresh programs share: the hash cache:<name> with
// value, version, fresh_until (Unix ms) and rebuilds; how it is read and how a rebuild stores it.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>

#include "../common/AppRedis.h"

namespace examples {

struct CacheEntry {
  std::string value;  // empty: no value at all (a cold cache)
  long long version = 0;
  bool fresh = false;
};

inline long long unixMillis() {
  // Wall clock on purpose: the expiry is shared by every host that reads the entry.
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline CacheEntry readEntry(AppRedis& redis, const std::string& key) {
  const Reply fields = redis.command({"HMGET", key, "value", "version", "fresh_until"});
  CacheEntry entry;
  entry.value = fields.elements.at(0).str;
  if (!fields.elements.at(1).isNil()) entry.version = std::stoll(fields.elements[1].str);
  entry.fresh = !fields.elements.at(2).isNil() && std::stoll(fields.elements[2].str) > unixMillis();
  return entry;
}

// Stores `value` as the next version after `entry`, fresh for a minute, and counts the rebuild.
inline void storeRebuilt(AppRedis& redis, const std::string& key, const CacheEntry& entry, const std::string& value) {
  const auto replies = redis.pipeline({{"MULTI"},
                                       {"HSET", key, "value", value, "version", std::to_string(entry.version + 1),
                                        "fresh_until", std::to_string(unixMillis() + 60000)},
                                       {"HINCRBY", key, "rebuilds", "1"},
                                       {"EXEC"}});
  if (replies.back().type != REDIS_REPLY_ARRAY) throw std::runtime_error("rebuild: EXEC failed: " + replies.back().str);
}

}  // namespace examples
