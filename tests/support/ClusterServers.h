// SPDX-License-Identifier: Apache-2.0
// ClusterServers.h — a private Redis Cluster for one test: the shape scripts/cluster-start makes
// (by default 3 masters with one replica each, `redis-cli --cluster create … --cluster-replicas 1
// --cluster-yes`), every node a RedisProcess on a free loopback port with its cluster bus on
// another free port (`cluster-port`), announcing 127.0.0.1, keeping nothing on disk but
// nodes.conf, with a short cluster-node-timeout. Every node is killed by pid on destruction.
//
// Besides the nodes it offers what topology tests do to a cluster: ask who serves a slot, kill
// and restart a node, wait for a failover, and migrate a slot live (SETSLOT IMPORTING/MIGRATING,
// MIGRATE, SETSLOT NODE), pausing between the steps so clients meet ASK and TRYAGAIN.
// A missing redis-server or redis-cli, or a cluster that does not form, is an error.
// Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"

namespace dlock::test {

class ClusterServers {
 public:
  struct Options {
    int masters = 3;  // at least 3 (what redis-cli --cluster create accepts)
    int replicasPerMaster = 1;
    std::chrono::milliseconds nodeTimeout{1000};
    std::vector<std::string> config;  // extra redis.conf lines for every node
    // TLS on every node (tls-cluster and tls-replication yes): CLUSTER SLOTS names the TLS ports,
    // uri() is rediss+cluster:// over them; the plain ports stay for the checks' clients.
    std::optional<RedisProcess::Tls> tls;
  };

  ClusterServers() : ClusterServers(Options{}) {}
  explicit ClusterServers(Options options);
  ClusterServers(const ClusterServers&) = delete;
  ClusterServers& operator=(const ClusterServers&) = delete;
  ~ClusterServers();

  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  [[nodiscard]] RedisProcess& node(std::size_t index) { return *nodes_.at(index); }
  [[nodiscard]] int port(std::size_t index) const { return nodes_.at(index)->port(); }
  [[nodiscard]] std::string address(std::size_t index) const;
  [[nodiscard]] const std::string& nodeId(std::size_t index) const { return ids_.at(index); }
  // The node listening on `port` (plain or TLS); throws if none.
  [[nodiscard]] std::size_t indexOfPort(int port) const;

  // redis+cluster://127.0.0.1:p0,… over every node, or over the nodes given; with Options::tls,
  // rediss+cluster:// over the TLS ports, trusting Options::tls's CA.
  [[nodiscard]] std::string uri() const;
  [[nodiscard]] std::string uri(const std::vector<std::size_t>& seeds) const;

  // A new plain client of one node (CLUSTER KEYSLOT, GET on the owner, INFO errorstats…).
  [[nodiscard]] RedisClient client(std::size_t index) const;

  // The nodes that are masters serving slots now, as the running nodes agree.
  [[nodiscard]] std::vector<std::size_t> masters();
  // The master serving `slot` now, as the first running node answers.
  [[nodiscard]] std::size_t ownerOf(std::uint16_t slot);
  // The master of every slot (kClusterSlots entries), as the first running node answers.
  [[nodiscard]] std::vector<std::size_t> slotOwners();
  // The running replicas of `master`.
  [[nodiscard]] std::vector<std::size_t> replicasOf(std::size_t master);

  // SIGKILL (the node's data is lost; nodes.conf stays) and a restart on the same port.
  void kill(std::size_t index);
  void restart(std::size_t index);
  [[nodiscard]] bool running(std::size_t index) const { return nodes_.at(index)->running(); }

  // Waits until every running node reports cluster_state:ok and they all name the same master
  // for every slot; throws after `budget`.
  void waitUntilStable(std::chrono::milliseconds budget = std::chrono::seconds(60));
  // Waits until a running node other than `deadMaster` serves its slots and the cluster is
  // stable again; returns that node. Throws after `budget`.
  std::size_t waitForFailover(std::size_t deadMaster, std::chrono::milliseconds budget = std::chrono::seconds(30));

  // Moves `slot` to the master `target` with its keys, live: IMPORTING on the target, MIGRATING
  // on the source, then MIGRATE in batches, then SETSLOT NODE on the target, the source and every
  // other master. Sleeps `pause` after opening the slot and after each batch, so clients see the
  // slot half-moved.
  void migrateSlot(std::uint16_t slot, std::size_t target,
                   std::chrono::milliseconds pause = std::chrono::milliseconds(0));
  // The three steps of migrateSlot, for tests that stop half-way. openMigration returns the source.
  std::size_t openMigration(std::uint16_t slot, std::size_t target);
  void moveKeys(std::uint16_t slot, std::size_t source, std::size_t target,
                std::chrono::milliseconds pause = std::chrono::milliseconds(0));
  void finishMigration(std::uint16_t slot, std::size_t source, std::size_t target);

  // `errorstat_<NAME>` of INFO errorstats on one node (0 when absent): MOVED, ASK, TRYAGAIN…
  [[nodiscard]] long long errorCount(std::size_t index, const std::string& name) const;

 private:
  void create();
  void waitForReplicas(std::chrono::milliseconds budget);

  Options options_;
  TempDir dir_;  // redis-cli's output
  std::vector<std::unique_ptr<RedisProcess>> nodes_;
  std::vector<std::string> ids_;
};

}  // namespace dlock::test
