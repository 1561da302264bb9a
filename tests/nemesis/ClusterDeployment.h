// SPDX-License-Identifier: Apache-2.0
// ClusterDeployment.h — a Redis Cluster of 3 masters with a replica each, every link through a
// LinkProxy: node i announces its client proxy P_i and its cluster-bus proxy B_i
// (cluster-announce-port/-bus-port), so replication and the gossip of the bus cross a proxy.
// Each client has a proxy of its own to each node, which rewrites the P_i in what the nodes answer
// (CLUSTER SLOTS, MOVED, ASK) into that client's own proxies' ports: a partition can then leave
// some clients with a master and others with the replica promoted in its place (split brain).
// Created with `redis-cli --cluster create` over the P_i (its MEETs carry the announced bus port).
// Owner: the runner. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "Deployment.h"

namespace dlock::nemesis {

class ClusterDeployment : public Deployment {
 public:
  static constexpr std::size_t kNodes = 6;

  explicit ClusterDeployment(std::size_t clients);

  [[nodiscard]] std::string topology() const override { return "cluster"; }
  [[nodiscard]] std::string lockUri(std::size_t slot) const override;
  // The running masters' own addresses.
  [[nodiscard]] std::vector<std::string> dataAddresses() const override;
  [[nodiscard]] std::vector<std::string> observedAddresses() const override;
  // The client's own proxies, one per node.
  [[nodiscard]] std::vector<test::LinkProxy*> clientLinks(std::size_t slot) override;
  // Every proxy passing, every node running, and the cluster stable (waitStable).
  void heal() override;

  // The hash slot of a lock key of the workload, and the master serving a slot now.
  [[nodiscard]] std::uint16_t slotOfLock(const std::string& key);
  [[nodiscard]] std::size_t ownerOf(std::uint16_t slot);
  [[nodiscard]] std::vector<std::size_t> masters();
  // Every running node in cluster_state:ok, all naming the same master for every slot.
  void waitStable(std::chrono::milliseconds budget);
  // Waits until a running node other than `dead` serves `slot`.
  std::size_t waitForNewOwner(std::uint16_t slot, std::size_t dead, std::chrono::milliseconds budget);

  // Waits until `node` is a replica whose link to its master is up (synced).
  void waitSyncedReplica(std::size_t node, std::chrono::milliseconds budget);

  void kill(std::size_t node) { nodes_.at(node)->kill(); }
  void restart(std::size_t node) { nodes_.at(node)->restart(); }
  // The link replicas and the cluster's tools use to reach `node`, and client `slot`'s own.
  [[nodiscard]] test::LinkProxy& clientLink(std::size_t node) { return *clientProxies_.at(node); }
  [[nodiscard]] test::LinkProxy& ownLink(std::size_t slot, std::size_t node) { return *ownProxies_.at(slot).at(node); }
  [[nodiscard]] test::LinkProxy& busLink(std::size_t node) { return *busProxies_.at(node); }

  // Cuts `node` off from every client and the bus: its own proxies blackholed, and at the others'
  // bus proxies the links it opened (a node that still hears from a peer never marks it failing).
  void isolate(std::size_t node);
  void rejoin(std::size_t node);

  // Moves `slot` with its keys to master `target` while clients run: IMPORTING, MIGRATING,
  // MIGRATE of each key, SETSLOT NODE everywhere; `pause` between the steps.
  void migrateSlot(std::uint16_t slot, std::size_t target, std::chrono::milliseconds pause);

 private:
  [[nodiscard]] std::size_t nodeOfProxyPort(long long port) const;
  [[nodiscard]] std::string nodeId(std::size_t node);

  std::vector<std::unique_ptr<test::LinkProxy>> clientProxies_;  // P_i
  std::vector<std::unique_ptr<test::LinkProxy>> busProxies_;     // B_i
  std::vector<std::vector<std::unique_ptr<test::LinkProxy>>> ownProxies_;  // [client slot][node]
  std::vector<std::unique_ptr<test::RedisProcess>> nodes_;
};

}  // namespace dlock::nemesis
