// SPDX-License-Identifier: Apache-2.0
// ClusterTopology.h — a Redis Cluster as RedisOperator's topology: each slot on its master, from
// the slot map (CLUSTER SLOTS, asked of the seeds first and of any known node later).
//
//   MOVED               the map is refreshed (and the slot set to the node named), then retried
//   ASK                 retried once on the node named, after ASKING on the same connection; a
//                       subscription cannot follow it: ConnectionError
//   TRYAGAIN, CLUSTERDOWN and the other "not now" replies
//                       retried with a doubling back-off (5 ms .. 100 ms) until the retry budget
//                       is spent; all but TRYAGAIN and BUSY also refresh the map
//   a node unreachable  the map is refreshed; if another node now owns the slot (a failover),
//                       retried there until the budget is spent
//   no owner            the map is asked again with the same back-off until the budget is spent
// At most 16 redirections per call. A node that stops serving slots loses its release
// subscriber, which wakes its waiters; their watches follow the slot.
// Owner: a ClusterOperator, per process. Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ClusterReplies.h"
#include "redis/src/Topology.h"
#include "dlock/cluster/ClusterOperator.h"

namespace dlock::detail {

class ClusterTopology final : public Topology {
 public:
  // ConfigError naming the field when the options are not usable.
  explicit ClusterTopology(const ClusterOptions& options);

  Route route(std::uint16_t slot) override;
  Verdict afterReply(const Route& route, std::string_view error) override;
  Verdict afterFailure(const Route& route, Failure failure) override;
  [[nodiscard]] bool retryable(std::string_view error) const override;
  std::vector<RedisNode*> owners(const std::vector<std::uint16_t>& slots) override;
  [[nodiscard]] bool serves(const RedisNode* node, std::uint16_t slot) const override;
  [[nodiscard]] bool sharded() const noexcept override { return true; }
  [[nodiscard]] std::vector<std::vector<std::string>> nodeCommands() const override { return {{"CLUSTER", "SLOTS"}}; }
  [[nodiscard]] std::string describe() const override { return describe_; }
  [[nodiscard]] std::uint64_t reconnects() const override;

  // Asks the cluster for the map unless it changed since `seen` (another call refreshed it).
  // ConnectionError when no known node answers.
  void refresh(std::uint64_t seen);
  [[nodiscard]] std::uint64_t version() const;
  // The slot's master, asking for the map first when there is none yet; null when none serves it.
  RedisNode* ownerOf(std::uint16_t slot);
  [[nodiscard]] std::uint64_t refreshes() const noexcept { return refreshes_.load(std::memory_order_relaxed); }

 private:
  RedisNode* nodeAt(const NodeAddress& address);
  RedisNode* nodeAtLocked(const NodeAddress& address);
  void refreshQuietly(std::uint64_t seen) noexcept;
  void apply(const std::vector<SlotRange>& ranges, const RedisNode& source);
  // After a failure on `route`: true when a refreshed map names another master for its slot.
  bool ownerChanged(const Route& route);

  const ConnectionOptions connection_;
  const PoolOptions pool_;
  std::string describe_;
  std::atomic<std::uint64_t> refreshes_{0};

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<RedisNode>> nodes_;  // guarded by mutex_; by "host:port", never erased
  std::vector<RedisNode*> seeds_;                            // fixed after construction
  std::vector<RedisNode*> slots_;                            // guarded by mutex_; one per slot
  std::uint64_t version_ = 0;                                // guarded by mutex_; maps applied
  std::mutex refreshMutex_;                                  // one CLUSTER SLOTS at a time
};

}  // namespace dlock::detail
