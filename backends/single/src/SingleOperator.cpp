// SPDX-License-Identifier: Apache-2.0
#include "dlock/single/SingleOperator.h"

#include "redis/src/FixedTopology.h"
#include "redis/src/RedisOperatorOptions.h"

namespace dlock {
namespace {

detail::RedisOperatorOptions redisOptions(const SingleOptions& options) {
  detail::RedisOperatorOptions redis;
  redis.keyPrefix = options.keyPrefix;
  redis.fenceTtl = options.fenceTtl;
  redis.commandTimeout = options.connection.commandTimeout;
  return redis;
}

}  // namespace

SingleOperator::SingleOperator(SingleOptions options)
    : RedisOperator(redisOptions(options), [options] {
        return std::make_shared<detail::FixedTopology>(options.connection, options.pool);
      }) {}

}  // namespace dlock
