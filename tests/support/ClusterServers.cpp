// SPDX-License-Identifier: Apache-2.0
#include "ClusterServers.h"

#include "ClusterSlots.h"

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "ChildProcess.h"

namespace dlock::test {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kSlots = 16384;


// What the first running node says about the slots.
SlotView firstRunningView(const ClusterServers& cluster) {
  for (std::size_t i = 0; i < cluster.size(); ++i) {
    if (!cluster.running(i)) continue;
    RedisClient node = cluster.client(i);
    return slotView(node);
  }
  throw std::runtime_error("cluster: no node is running");
}

std::string tail(const std::string& path) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.size() > 1500 ? text.substr(text.size() - 1500) : text;
}

}  // namespace

ClusterServers::ClusterServers(Options options) : options_(std::move(options)) {
  if (options_.masters < 3) throw std::invalid_argument("ClusterServers: redis-cli --cluster create needs 3 masters");
  // If this throws, the members stop the nodes started so far and remove the directory.
  const int total = options_.masters * (1 + options_.replicasPerMaster);
  std::set<int> taken;  // client and bus ports of the nodes started so far
  for (int i = 0; i < total; ++i) {
    for (int attempt = 0;; ++attempt) {
      int bus = freeLoopbackPort();
      while (taken.count(bus) != 0) bus = freeLoopbackPort();
      RedisProcess::Options node;
      node.config = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                     "cluster-node-timeout " + std::to_string(options_.nodeTimeout.count()),
                     "cluster-announce-ip 127.0.0.1", "cluster-port " + std::to_string(bus),
                     // A replica may always take over, however long its master was away.
                     "cluster-replica-validity-factor 0",
                     // Replicas sync at once rather than after the default 5 s.
                     "repl-diskless-sync-delay 0"};
      node.config.insert(node.config.end(), options_.config.begin(), options_.config.end());
      if (options_.tls) {
        node.tls = options_.tls;
        node.config.insert(node.config.end(), {"tls-cluster yes", "tls-replication yes"});
      }
      try {
        nodes_.push_back(std::make_unique<RedisProcess>(node));
        taken.insert(bus);
        taken.insert(nodes_.back()->port());
        break;
      } catch (const std::exception&) {
        // The bus port may have been taken meanwhile: another pair.
        if (attempt == 4) throw;
      }
    }
  }
  for (std::size_t i = 0; i < nodes_.size(); ++i) ids_.push_back(client(i).ok({"CLUSTER", "MYID"}).str);
  create();
  waitUntilStable();
  waitForReplicas(60s);
}

// nodes_ goes first (each RedisProcess kills its pid and removes its directory), then dir_.
ClusterServers::~ClusterServers() = default;

std::string ClusterServers::address(std::size_t index) const { return "127.0.0.1:" + std::to_string(port(index)); }

std::size_t ClusterServers::indexOfPort(int port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i]->port() == port || nodes_[i]->tlsPort() == port) return i;
  }
  throw std::runtime_error("cluster: no node on port " + std::to_string(port));
}

std::string ClusterServers::uri() const {
  std::vector<std::size_t> all(nodes_.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  return uri(all);
}

std::string ClusterServers::uri(const std::vector<std::size_t>& seeds) const {
  std::string text = options_.tls ? "rediss+cluster://" : "redis+cluster://";
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    text += (i == 0 ? "" : ",") +
            (options_.tls ? "127.0.0.1:" + std::to_string(nodes_.at(seeds[i])->tlsPort()) : address(seeds[i]));
  }
  if (options_.tls) text += "?tls_ca_file=" + options_.tls->caFile;
  return text;
}

RedisClient ClusterServers::client(std::size_t index) const { return RedisClient("127.0.0.1", port(index), 5s); }

void ClusterServers::create() {
  std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
  for (std::size_t i = 0; i < nodes_.size(); ++i) args.push_back(address(i));
  args.insert(args.end(), {"--cluster-replicas", std::to_string(options_.replicasPerMaster), "--cluster-yes"});
  const std::string log = dir_.file("create.log");
  ChildProcess redisCli(ChildProcess::Options{args, {}, log, true});
  const std::optional<int> status = redisCli.waitFor(60s);  // killed on the way out if still running
  if (!status) throw std::runtime_error("cluster: redis-cli --cluster create did not finish: " + tail(log));
  if (*status == 127) throw std::runtime_error("cluster: cannot run redis-cli (install redis-tools)");
  if (*status != 0) throw std::runtime_error("cluster: redis-cli --cluster create failed: " + tail(log));
}

void ClusterServers::waitUntilStable(std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  std::string problem = "not checked";
  while (Steady::now() < deadline) {
    try {
      std::optional<SlotView> agreed;
      bool stable = true;
      for (std::size_t i = 0; i < nodes_.size() && stable; ++i) {
        if (!running(i)) continue;
        RedisClient node = client(i);
        const std::string info = node.ok({"CLUSTER", "INFO"}).str;
        if (info.find("cluster_state:ok") == std::string::npos) {
          problem = address(i) + " is not in cluster_state:ok";
          stable = false;
          break;
        }
        SlotView view = slotView(node);
        if (!coversAllSlots(view)) {
          problem = address(i) + " does not see all slots served";
          stable = false;
        } else if (agreed && *agreed != view) {
          problem = address(i) + " disagrees about the slot owners";
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
  throw std::runtime_error("cluster: not stable within " + std::to_string(budget.count()) + " ms: " + problem);
}

void ClusterServers::waitForReplicas(std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!running(i)) continue;
    while (true) {
      const Reply role = client(i).ok({"ROLE"});
      // A replica: ["slave", host, port, "connected", offset] once synced.
      if (role.elements.empty() || role.elements[0].str != "slave" ||
          (role.elements.size() > 3 && role.elements[3].str == "connected")) {
        break;
      }
      if (Steady::now() > deadline) throw std::runtime_error("cluster: replica " + address(i) + " did not sync");
      std::this_thread::sleep_for(50ms);
    }
  }
}

std::vector<std::size_t> ClusterServers::masters() {
  std::set<std::size_t> found;
  for (const auto& [first, last, port] : firstRunningView(*this)) found.insert(indexOfPort(static_cast<int>(port)));
  return {found.begin(), found.end()};
}

std::size_t ClusterServers::ownerOf(std::uint16_t slot) {
  for (const auto& [first, last, port] : firstRunningView(*this)) {
    if (first <= slot && slot <= last) return indexOfPort(static_cast<int>(port));
  }
  throw std::runtime_error("cluster: nobody serves slot " + std::to_string(slot));
}

std::vector<std::size_t> ClusterServers::slotOwners() {
  std::vector<std::size_t> owners(kSlots, nodes_.size());
  for (const auto& [first, last, port] : firstRunningView(*this)) {
    const std::size_t owner = indexOfPort(static_cast<int>(port));
    for (long long slot = first; slot <= last; ++slot) owners[static_cast<std::size_t>(slot)] = owner;
  }
  return owners;
}

std::vector<std::size_t> ClusterServers::replicasOf(std::size_t master) {
  std::vector<std::size_t> replicas;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!running(i) || i == master) continue;
    const Reply role = client(i).ok({"ROLE"});
    if (role.elements.size() > 2 && role.elements[0].str == "slave" && role.elements[2].integer == port(master)) {
      replicas.push_back(i);
    }
  }
  return replicas;
}

void ClusterServers::kill(std::size_t index) { nodes_.at(index)->kill(); }

void ClusterServers::restart(std::size_t index) { nodes_.at(index)->restart(); }

std::size_t ClusterServers::waitForFailover(std::size_t deadMaster, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  // A slot the dead master served, as the survivors remember it.
  std::optional<long long> slot;
  const int deadPort = port(deadMaster);
  std::string problem = "no running node";
  while (Steady::now() < deadline) {
    try {
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        if (!running(i) || i == deadMaster) continue;
        RedisClient node = client(i);
        std::optional<std::size_t> owner;
        for (const auto& [first, last, owningPort] : slotView(node)) {
          if (!slot && owningPort == deadPort) slot = first;
          if (slot && first <= *slot && *slot <= last && owningPort != deadPort) {
            owner = indexOfPort(static_cast<int>(owningPort));
          }
        }
        if (owner && running(*owner)) {
          waitUntilStable(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()));
          return *owner;
        }
        problem = "the slots of " + address(deadMaster) + " have no new master yet";
        break;
      }
    } catch (const std::exception& error) {
      problem = error.what();
    }
    std::this_thread::sleep_for(50ms);
  }
  throw std::runtime_error("cluster: no failover within " + std::to_string(budget.count()) + " ms: " + problem);
}

void ClusterServers::migrateSlot(std::uint16_t slot, std::size_t target, std::chrono::milliseconds pause) {
  const std::size_t source = openMigration(slot, target);
  std::this_thread::sleep_for(pause);
  moveKeys(slot, source, target, pause);
  finishMigration(slot, source, target);
}

std::size_t ClusterServers::openMigration(std::uint16_t slot, std::size_t target) {
  const std::size_t source = ownerOf(slot);
  if (source == target) throw std::invalid_argument("cluster: slot " + std::to_string(slot) + " is there already");
  const std::string slotText = std::to_string(slot);
  client(target).ok({"CLUSTER", "SETSLOT", slotText, "IMPORTING", nodeId(source)});
  client(source).ok({"CLUSTER", "SETSLOT", slotText, "MIGRATING", nodeId(target)});
  return source;
}

void ClusterServers::moveKeys(std::uint16_t slot, std::size_t source, std::size_t target,
                               std::chrono::milliseconds pause) {
  const std::string slotText = std::to_string(slot);
  RedisClient from = client(source);
  while (true) {
    const Reply keys = from.ok({"CLUSTER", "GETKEYSINSLOT", slotText, "100"});
    if (keys.elements.empty()) return;
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(port(target)), "", "0", "5000", "KEYS"};
    for (const auto& key : keys.elements) migrate.push_back(key.str);
    const Reply moved = from.command(migrate);
    // NOKEY: the keys went away (released) between GETKEYSINSLOT and MIGRATE.
    if (moved.isError() || (moved.str != "OK" && moved.str != "NOKEY")) {
      throw std::runtime_error("cluster: MIGRATE of slot " + slotText + " failed: " + moved.str);
    }
    std::this_thread::sleep_for(pause);
  }
}

void ClusterServers::finishMigration(std::uint16_t slot, std::size_t source, std::size_t target) {
  // Hand the slot over: the target first, then the source, then every other master.
  const std::string slotText = std::to_string(slot);
  const std::vector<std::size_t> others = masters();
  client(target).ok({"CLUSTER", "SETSLOT", slotText, "NODE", nodeId(target)});
  client(source).ok({"CLUSTER", "SETSLOT", slotText, "NODE", nodeId(target)});
  for (const std::size_t other : others) {
    if (other != source && other != target) client(other).ok({"CLUSTER", "SETSLOT", slotText, "NODE", nodeId(target)});
  }
}

long long ClusterServers::errorCount(std::size_t index, const std::string& name) const {
  const std::string info = client(index).ok({"INFO", "errorstats"}).str;
  const std::string field = "errorstat_" + name + ":count=";
  const auto at = info.find(field);
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + field.size()));
}

}  // namespace dlock::test
