// ClusterOperator.h — the IOperator for a Redis Cluster, through hiredis.
//
//   ClusterSeed       one node to learn the cluster from
//   ClusterOptions    seeds, the connection and pool settings of every node, key prefix, retry budget
//   ClusterOperator   the operator
//
// Routing. The slot map comes from CLUSTER SLOTS, asked of the seeds first and of any known node
// later; each key goes to the master of its slot (CRC16 of its hash tag, see ClusterKeys.h for
// keys with braces), through a small connection pool per node. Every command of the lock
// protocol is one Lua script on one slot, run by EVALSHA (EVAL on NOSCRIPT: scripts are cached
// per node, and a new or promoted node has none).
//
// Redirections and retries, within one call:
//   MOVED              the map is refreshed (and the slot set to the node named), then retried
//   ASK                retried once on the node named, right after ASKING on the same connection
//   TRYAGAIN, CLUSTERDOWN (and the other "not now" replies: LOADING, MASTERDOWN, READONLY, BUSY)
//                      retried with a doubling back-off (5 ms .. 100 ms) until the retry budget
//                      (ClusterOptions::retryBudget) is spent, then ConnectionError; all but
//                      TRYAGAIN and BUSY also refresh the map
//   a node unreachable the map is refreshed; if another node now owns the slot (a failover),
//                      retried there, otherwise ConnectionError
//   no owner           (a slot being reassigned, or a cluster whose nodes answer but serve no slots
//                      at all) the map is asked again with the same back-off until the budget is
//                      spent, then ConnectionError, as the server's own CLUSTERDOWN would be.
//                      BackendError is kept for replies dlock cannot use (NOPERM on CLUSTER SLOTS,
//                      a server without cluster support).
// At most 16 redirections per call. A refused SSUBSCRIBE is handled alike: MOVED refreshes the
// map and subscribes on the slot's owner; ASK (a slot half-migrated, which a subscription cannot
// follow) and the "not now" replies are ConnectionError; other refusals (NOPERM) BackendError.
//
// Failover: when a master dies, calls on its slots fail with ConnectionError until the cluster
// has promoted a replica and a node reports it (about cluster-node-timeout plus an election);
// with cluster-require-full-coverage (the default) the whole cluster answers CLUSTERDOWN
// meanwhile, which also ends in ConnectionError once the budget is spent.
//
// Release messages go through sharded pub/sub: the release script SPUBLISHes on the key's channel
// (same slot), and waiters SSUBSCRIBE through one subscriber per master, chosen by slot. A watch
// follows its slot: once the map shows another owner (after MOVED or a failover), or the node
// drops the channel (a node unsubscribes the channels of a slot it hands over, which wakes the
// waiters), it subscribes again where the slot lives and reports a possible release, so the
// waiter tries again. While a slot is half-migrated, a release that runs on the target after
// ASKING publishes there, where nobody listens yet: its waiters wake at the hand-over, or at
// their wait strategy's recheck bound (NotifyWait: 1 s), whichever is first.
//
// extendAll groups leases by master: one pipelined round trip per node.
// After fork(), a child's first call asks for the slot map again with its own connections and
// subscribers; the parent's are never used there.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dlock/IOperator.h"
#include "dlock/common/RedisOptions.h"

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
  // How long one call keeps retrying TRYAGAIN, CLUSTERDOWN and the like (a slot migration, an
  // election) before ConnectionError. Unset: connection.commandTimeout.
  std::optional<std::chrono::milliseconds> retryBudget;
};

class ClusterOperator final : public IOperator {
 public:
  // Checks the options (ConfigError naming the field) and connects lazily: construction never
  // blocks; the first call asks the seeds for the slot map.
  explicit ClusterOperator(ClusterOptions options);
  ~ClusterOperator() override;

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override;
  LeaseInfo inspect(std::string_view key) override;
  // "redis+cluster://host:port,host:port" (the seeds).
  [[nodiscard]] std::string describe() const override;

  // Asks the cluster for its slot map now. ConnectionError when no known node answers; a map in
  // which no node serves any slot is taken as it is (calls then end in ConnectionError).
  void refreshSlots();
  // The master now serving `key`'s slot, as "host:port", from the current map (refreshed first
  // if there is none yet).
  [[nodiscard]] std::string nodeFor(std::string_view key);
  // Connections re-opened after a failure (those of masters since dropped from the map
  // included), and slot map refreshes, since construction. Neither ever goes down.
  [[nodiscard]] std::uint64_t reconnects() const noexcept;
  [[nodiscard]] std::uint64_t slotRefreshes() const noexcept;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock
