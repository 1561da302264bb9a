// SPDX-License-Identifier: Apache-2.0
// ClusterOperator.h — the IOperator for a Redis Cluster: RedisOperator over the slot map, each
// key on its slot's master, release messages through sharded pub/sub. Redirections, "not now"
// replies and failovers are followed within the retry budget (backends/cluster/README.md).
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/common/RedisOptions.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

struct ClusterSeed {
  std::string host = "127.0.0.1";
  int port = 6379;
};

struct ClusterOptions {
  // Nodes to ask for the slot map, in order; any node of the cluster will do, and dead ones are
  // skipped. At least one.
  std::vector<ClusterSeed> seeds;
  // Credentials, timeouts and keep-alive for every node; host and port are ignored (they come
  // from the seeds and the slot map); db must be 0, the only database of a cluster.
  ConnectionOptions connection;
  // Per node.
  PoolOptions pool;
  // No '{' or '}' (it would capture the hash tag).
  std::string keyPrefix = kDefaultKeyPrefix;
  std::chrono::milliseconds fenceTtl = kDefaultFenceTtl;  // see RedisOptions.h
  // How long one call keeps retrying TRYAGAIN, CLUSTERDOWN and the like (a slot migration, an
  // election) before ConnectionError. Unset: connection.commandTimeout.
  std::optional<std::chrono::milliseconds> retryBudget;
};

class ClusterOperator final : public RedisOperator {
 public:
  // Checks the options (ConfigError naming the field) and connects lazily: construction never
  // blocks; the first call asks the seeds for the slot map.
  explicit ClusterOperator(ClusterOptions options);

  // Asks the cluster for its slot map now. ConnectionError when no known node answers; a map in
  // which no node serves any slot is taken as it is (calls then end in ConnectionError).
  void refreshSlots();
  // The master now serving `key`'s slot, as "host:port", from the current map (refreshed first
  // if there is none yet).
  [[nodiscard]] std::string nodeFor(std::string_view key);
  // Slot map refreshes since construction.
  [[nodiscard]] std::uint64_t slotRefreshes() const noexcept;

 private:
  const std::string prefix_;
};

}  // namespace dlock
