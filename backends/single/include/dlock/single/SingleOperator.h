// SPDX-License-Identifier: Apache-2.0
// SingleOperator.h — the IOperator for one Redis server (RedisOperator over one node). Redis
// keys: `<prefix>{<key>}` holds the token, `<prefix>{<key>}:fence` the fencing counter,
// `<prefix>{<key>}:released` is the release channel.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <chrono>

#include <string>

#include "dlock/common/RedisOptions.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

struct SingleOptions {
  ConnectionOptions connection;
  PoolOptions pool;
  std::string keyPrefix = kDefaultKeyPrefix;
  std::chrono::milliseconds fenceTtl = kDefaultFenceTtl;  // see RedisOptions.h
};

class SingleOperator final : public RedisOperator {
 public:
  // Connects lazily: construction never blocks; the first call opens the first connection.
  explicit SingleOperator(SingleOptions options);
};

}  // namespace dlock
