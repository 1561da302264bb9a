// SPDX-License-Identifier: Apache-2.0
#include "ClusterDeployment.h"

#include <algorithm>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "ChildProcess.h"
#include "ClusterSlots.h"
#include "RedisClient.h"

namespace dlock::nemesis {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kNodeTimeout = 1000ms;
constexpr auto kFormBudget = 60s;
// Where a bus message names its sender: after the signature, length, version, port, type, count
// and three 64-bit epochs/offsets of Redis's clusterMsg header.
constexpr std::size_t kSenderOffset = 40;

using test::SlotView;
using test::slotView;
using test::coversAllSlots;

test::RedisClient direct(const test::RedisProcess& node) { return test::RedisClient(node.host(), node.port(), 2s); }

}  // namespace

ClusterDeployment::ClusterDeployment(std::size_t clients) : Deployment(clients) {
  // Proxies first: each node's config announces its own; they point nowhere until it runs.
  for (std::size_t i = 0; i < kNodes; ++i) {
    clientProxies_.push_back(std::make_unique<test::LinkProxy>("127.0.0.1", 1));
    busProxies_.push_back(std::make_unique<test::LinkProxy>("127.0.0.1", 1));
  }
  std::set<int> taken;
  for (std::size_t i = 0; i < kNodes; ++i) {
    for (int attempt = 0;; ++attempt) {
      int bus = test::freeLoopbackPort();
      while (taken.count(bus) != 0) bus = test::freeLoopbackPort();
      test::RedisProcess::Options node;
      node.config = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                     "cluster-node-timeout " + std::to_string(kNodeTimeout.count()),
                     "cluster-port " + std::to_string(bus), "cluster-announce-ip 127.0.0.1",
                     "cluster-announce-port " + std::to_string(clientProxies_[i]->port()),
                     "cluster-announce-bus-port " + std::to_string(busProxies_[i]->port()),
                     // A replica may always take over, however long its master was away.
                     "cluster-replica-validity-factor 0", "repl-diskless-sync-delay 0"};
      try {
        nodes_.push_back(std::make_unique<test::RedisProcess>(node));
        taken.insert({bus, nodes_.back()->port()});
        clientProxies_[i]->retarget(nodes_.back()->port());
        busProxies_[i]->retarget(bus);
        break;
      } catch (const std::exception&) {
        if (attempt == 4) throw;  // the bus port was taken meanwhile: another, a few times
      }
    }
  }
  // Each client's own links, rewriting the P_i the nodes name into its own.
  ownProxies_.resize(clients);
  for (auto& own : ownProxies_) {
    std::vector<std::pair<std::string, std::string>> rewrites;
    for (std::size_t i = 0; i < kNodes; ++i) {
      own.push_back(std::make_unique<test::LinkProxy>("127.0.0.1", nodes_[i]->port()));
      rewrites.emplace_back(std::to_string(clientProxies_[i]->port()), std::to_string(own[i]->port()));
      if (rewrites.back().first.size() != rewrites.back().second.size()) {
        throw std::runtime_error("cluster deployment: proxy ports " + rewrites.back().first + " and " +
                                 rewrites.back().second + " differ in length; a reply cannot be rewritten in place");
      }
    }
    for (auto& proxy : own) proxy->rewriteReplies(rewrites);
  }
  std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
  for (const auto& proxy : clientProxies_) args.push_back(proxy->address());
  args.insert(args.end(), {"--cluster-replicas", "1", "--cluster-yes"});
  const std::string log = nodes_[0]->directory() + "/cluster-create.log";
  test::ChildProcess redisCli(test::ChildProcess::Options{args, {}, log, true});
  const std::optional<int> status = redisCli.waitFor(kFormBudget);
  if (!status || *status != 0) throw std::runtime_error("cluster deployment: redis-cli --cluster create failed");
  waitStable(kFormBudget);
}

std::string ClusterDeployment::lockUri(std::size_t slot) const {
  std::string uri = "redis+cluster://";
  for (std::size_t i = 0; i < kNodes; ++i) uri += (i == 0 ? "" : ",") + ownProxies_.at(slot)[i]->address();
  return uri + "?" + clientQuery();
}

std::vector<std::string> ClusterDeployment::observedAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& node : nodes_) addresses.push_back(node->host() + ":" + std::to_string(node->port()));
  return addresses;
}

std::vector<std::string> ClusterDeployment::dataAddresses() const {
  std::vector<std::string> addresses;
  // Masters only: a replica answers the scan's PTTL with MOVED.
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    const test::Reply role = direct(*node).ok({"ROLE"});
    if (!role.elements.empty() && role.elements[0].str == "master") {
      addresses.push_back(node->host() + ":" + std::to_string(node->port()));
    }
  }
  return addresses;
}

std::vector<test::LinkProxy*> ClusterDeployment::clientLinks(std::size_t slot) {
  std::vector<test::LinkProxy*> links;
  for (auto& proxy : ownProxies_.at(slot)) links.push_back(proxy.get());
  return links;
}

std::size_t ClusterDeployment::nodeOfProxyPort(long long port) const {
  for (std::size_t i = 0; i < kNodes; ++i) {
    if (clientProxies_[i]->port() == port) return i;
  }
  throw std::runtime_error("cluster deployment: no node announces port " + std::to_string(port));
}

std::string ClusterDeployment::nodeId(std::size_t node) { return direct(*nodes_.at(node)).ok({"CLUSTER", "MYID"}).str; }

std::uint16_t ClusterDeployment::slotOfLock(const std::string& key) {
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    // The lock's names hash on `{key}` (ClusterKeys.h).
    return static_cast<std::uint16_t>(direct(*node).ok({"CLUSTER", "KEYSLOT", "{" + key + "}"}).integer);
  }
  throw std::runtime_error("cluster deployment: no node is running");
}

std::size_t ClusterDeployment::ownerOf(std::uint16_t slot) {
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    test::RedisClient client = direct(*node);
    for (const auto& [first, last, port] : slotView(client)) {
      if (first <= slot && slot <= last) return nodeOfProxyPort(port);
    }
  }
  throw std::runtime_error("cluster deployment: nobody serves slot " + std::to_string(slot));
}

std::vector<std::size_t> ClusterDeployment::masters() {
  for (const auto& node : nodes_) {
    if (!node->running()) continue;
    test::RedisClient client = direct(*node);
    std::set<std::size_t> found;
    for (const auto& [first, last, port] : slotView(client)) found.insert(nodeOfProxyPort(port));
    return {found.begin(), found.end()};
  }
  throw std::runtime_error("cluster deployment: no node is running");
}

void ClusterDeployment::waitStable(std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  std::string problem = "not checked";
  while (Steady::now() < deadline) {
    try {
      std::optional<SlotView> agreed;
      bool stable = true;
      for (std::size_t i = 0; i < kNodes && stable; ++i) {
        if (!nodes_[i]->running()) continue;
        test::RedisClient client = direct(*nodes_[i]);
        if (client.ok({"CLUSTER", "INFO"}).str.find("cluster_state:ok") == std::string::npos) {
          problem = "node " + std::to_string(i) + " is not in cluster_state:ok";
          stable = false;
          break;
        }
        SlotView view = slotView(client);
        if (!coversAllSlots(view) || (agreed && *agreed != view)) {
          problem = "node " + std::to_string(i) + " disagrees about the slot owners";
          stable = false;
        }
        agreed = std::move(view);
      }
      if (stable) return;
    } catch (const std::exception& error) {
      problem = error.what();
    }
    std::this_thread::sleep_for(50ms);
  }
  throw std::runtime_error("cluster deployment: not stable within " + std::to_string(budget.count()) + " ms: " + problem);
}

std::size_t ClusterDeployment::waitForNewOwner(std::uint16_t slot, std::size_t dead, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (Steady::now() < deadline) {
    try {
      for (std::size_t i = 0; i < kNodes; ++i) {
        if (i == dead || !nodes_[i]->running()) continue;
        test::RedisClient client = direct(*nodes_[i]);
        for (const auto& [first, last, port] : slotView(client)) {
          if (first <= slot && slot <= last && nodeOfProxyPort(port) != dead) return nodeOfProxyPort(port);
        }
        break;  // one survivor's view is enough
      }
    } catch (const std::exception&) {
    }
    std::this_thread::sleep_for(50ms);
  }
  throw std::runtime_error("cluster deployment: slot " + std::to_string(slot) + " has no new owner in time");
}

void ClusterDeployment::migrateSlot(std::uint16_t slot, std::size_t target, std::chrono::milliseconds pause) {
  const std::size_t source = ownerOf(slot);
  if (source == target) throw std::invalid_argument("cluster deployment: the slot is there already");
  const std::string slotText = std::to_string(slot);
  const std::string sourceId = nodeId(source);
  const std::string targetId = nodeId(target);
  direct(*nodes_[target]).ok({"CLUSTER", "SETSLOT", slotText, "IMPORTING", sourceId});
  direct(*nodes_[source]).ok({"CLUSTER", "SETSLOT", slotText, "MIGRATING", targetId});
  std::this_thread::sleep_for(pause);  // clients meet ASK while the slot is open
  test::RedisClient from = direct(*nodes_[source]);
  while (true) {
    const test::Reply keys = from.ok({"CLUSTER", "GETKEYSINSLOT", slotText, "10"});
    if (keys.elements.empty()) break;
    for (const auto& key : keys.elements) {
      // Through the target's proxy, as any traffic between nodes.
      (void)from.ok({"MIGRATE", "127.0.0.1", std::to_string(clientProxies_[target]->port()), key.str, "0", "5000"});
    }
    std::this_thread::sleep_for(pause);
  }
  direct(*nodes_[target]).ok({"CLUSTER", "SETSLOT", slotText, "NODE", targetId});
  direct(*nodes_[source]).ok({"CLUSTER", "SETSLOT", slotText, "NODE", targetId});
  for (const std::size_t other : masters()) {
    if (other != source && other != target) direct(*nodes_[other]).ok({"CLUSTER", "SETSLOT", slotText, "NODE", targetId});
  }
}

void ClusterDeployment::isolate(std::size_t node) {
  const std::string id = nodeId(node);
  clientProxies_.at(node)->blackhole();
  for (auto& own : ownProxies_) own.at(node)->blackhole();
  busProxies_.at(node)->blackhole();
  for (std::size_t other = 0; other < kNodes; ++other) {
    if (other != node) busProxies_[other]->blackholeClientsSending(id, kSenderOffset);
  }
}

void ClusterDeployment::rejoin(std::size_t node) {
  clientProxies_.at(node)->pass();
  for (auto& own : ownProxies_) own.at(node)->pass();
  for (auto& proxy : busProxies_) proxy->pass();
}

void ClusterDeployment::waitSyncedReplica(std::size_t node, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  std::string last = "not asked";
  while (Steady::now() < deadline) {
    try {
      last = direct(*nodes_.at(node)).ok({"INFO", "replication"}).str;
      const bool replica = last.find("role:slave") != std::string::npos;
      if (replica && last.find("master_link_status:up") != std::string::npos) return;
    } catch (const std::exception& error) {
      last = error.what();
    }
    std::this_thread::sleep_for(50ms);
  }
  throw std::runtime_error("cluster deployment: node " + std::to_string(node) + " not a synced replica within " +
                           std::to_string(budget.count()) + " ms");
}

void ClusterDeployment::heal() {
  for (auto& proxy : clientProxies_) proxy->pass();
  for (test::LinkProxy* proxy : allClientLinks()) proxy->pass();
  for (auto& proxy : busProxies_) proxy->pass();
  for (auto& node : nodes_) {
    if (!node->running()) node->restart();
  }
  waitStable(kFormBudget);
}

}  // namespace dlock::nemesis
