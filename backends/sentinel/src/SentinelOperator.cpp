// SPDX-License-Identifier: Apache-2.0
#include "dlock/sentinel/SentinelOperator.h"

#include "redis/src/RedisOperatorOptions.h"
#include "SentinelTopology.h"

namespace dlock {
namespace {

detail::RedisOperatorOptions redisOptions(const SentinelOptions& options) {
  detail::RedisOperatorOptions redis;
  redis.keyPrefix = options.keyPrefix;
  redis.fenceTtl = options.fenceTtl;
  redis.commandTimeout = options.connection.commandTimeout;
  redis.waitReplicas = options.waitReplicas;
  redis.waitTimeout = options.waitTimeout;
  return redis;
}

const detail::SentinelTopology& sentinel(const detail::Topology& topology) {
  return static_cast<const detail::SentinelTopology&>(topology);
}

}  // namespace

SentinelOperator::SentinelOperator(SentinelOptions options)
    : RedisOperator(redisOptions(options), [options] { return std::make_shared<detail::SentinelTopology>(options); }) {}

std::string SentinelOperator::masterAddress() const { return sentinel(topology()).masterAddress(); }

std::uint64_t SentinelOperator::masterSwitches() const noexcept {
  try {
    return sentinel(topology()).switches();
  } catch (...) {  // a forked child could not set up its own state yet: no switch seen
    return 0;
  }
}

}  // namespace dlock
