// SPDX-License-Identifier: Apache-2.0
#include "dlock/cluster/ClusterOperator.h"

#include "ClusterTopology.h"
#include "redis/src/KeyNames.h"
#include "redis/src/RedisOperatorOptions.h"
#include "dlock/LockError.h"

namespace dlock {
namespace {

detail::RedisOperatorOptions redisOptions(const ClusterOptions& options) {
  detail::RedisOperatorOptions redis;
  redis.keyPrefix = options.keyPrefix;
  redis.fenceTtl = options.fenceTtl;
  redis.retryBudget = options.retryBudget.value_or(options.connection.commandTimeout);
  redis.commandTimeout = options.connection.commandTimeout;
  return redis;
}

detail::ClusterTopology& cluster(detail::Topology& topology) { return static_cast<detail::ClusterTopology&>(topology); }

}  // namespace

ClusterOperator::ClusterOperator(ClusterOptions options)
    : RedisOperator(redisOptions(options), [options] { return std::make_shared<detail::ClusterTopology>(options); }),
      prefix_(options.keyPrefix) {}

void ClusterOperator::refreshSlots() {
  detail::ClusterTopology& here = cluster(topology());
  here.refresh(here.version());
}

std::string ClusterOperator::nodeFor(std::string_view key) {
  const std::uint16_t slot = detail::KeyNames(prefix_, key, true).slot();
  const detail::RedisNode* node = cluster(topology()).ownerOf(slot);
  if (node == nullptr) throw ConnectionError("dlock: no node of " + describe() + " serves slot " + std::to_string(slot));
  return node->address();
}

std::uint64_t ClusterOperator::slotRefreshes() const noexcept {
  try {
    return cluster(topology()).refreshes();
  } catch (...) {  // a forked child could not set up its own state yet
    return 0;
  }
}

}  // namespace dlock
