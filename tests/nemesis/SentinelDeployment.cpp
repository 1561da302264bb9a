// SPDX-License-Identifier: Apache-2.0
#include "SentinelDeployment.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <random>
#include <stdexcept>
#include <thread>

#include "RedisClient.h"

namespace dlock::nemesis {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr const char* kMasterName = "nemesis";
constexpr auto kAskTimeout = 300ms;
constexpr auto kHealBudget = 30s;

std::string randomId() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id;
  for (int i = 0; i < 40; ++i) id += kHex[device() % 16];
  return id;
}

// A flat array of alternating names and values, as SENTINEL MASTER answers.
std::map<std::string, std::string> fields(const test::Reply& reply) {
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) out[reply.elements[i].str] = reply.elements[i + 1].str;
  return out;
}

// Flags that say an instance is down, unreachable or mid-failover. Others (master_down: a sentinel
// said so a while ago, cleared after 5 s) are history, not health.
bool troubled(const std::string& flags) {
  for (const char* flag : {"s_down", "o_down", "disconnected", "failover_in_progress", "promoted", "reconf"}) {
    if (flags.find(flag) != std::string::npos) return true;
  }
  return false;
}

test::RedisClient direct(const test::RedisProcess& process) {
  return test::RedisClient(process.host(), process.port(), kAskTimeout);
}

}  // namespace

SentinelDeployment::SentinelDeployment(std::size_t clients, Options options)
    : Deployment(clients), options_(options) {
  // The proxies come first: each server's config names its own proxy's port. They point at a
  // port nothing listens on until their server runs.
  for (std::size_t i = 0; i < kDataNodes; ++i) dataProxies_.push_back(std::make_unique<test::LinkProxy>("127.0.0.1", 1));
  for (std::size_t j = 0; j < kSentinels; ++j) {
    sentinelProxies_.push_back(std::make_unique<test::LinkProxy>("127.0.0.1", 1));
  }
  // Each client's own links, rewriting the shared ports the sentinels name into its own.
  clientData_.resize(clients);
  clientSentinels_.resize(clients);
  for (std::size_t slot = 0; slot < clients; ++slot) {
    std::vector<std::pair<std::string, std::string>> rewrites;
    for (std::size_t i = 0; i < kDataNodes; ++i) {
      clientData_[slot].push_back(std::make_unique<test::LinkProxy>("127.0.0.1", 1));
      rewrites.emplace_back(std::to_string(dataProxies_[i]->port()), std::to_string(clientData_[slot][i]->port()));
    }
    for (std::size_t j = 0; j < kSentinels; ++j) {
      clientSentinels_[slot].push_back(std::make_unique<test::LinkProxy>("127.0.0.1", 1));
      rewrites.emplace_back(std::to_string(sentinelProxies_[j]->port()),
                            std::to_string(clientSentinels_[slot][j]->port()));
    }
    for (const auto& [shared, own] : rewrites) {
      if (shared.size() != own.size()) {
        throw std::runtime_error("sentinel deployment: proxy ports " + shared + " and " + own +
                                 " differ in length; a reply cannot be rewritten in place");
      }
    }
    for (auto& proxy : clientSentinels_[slot]) proxy->rewriteReplies(rewrites);
  }
  for (std::size_t i = 0; i < kDataNodes && options_.fakeClocks; ++i) {
    clocks_.push_back(std::make_unique<ServerClock>("sentinel-data-" + std::to_string(i)));
  }
  data_.resize(kDataNodes);
  for (std::size_t i = 0; i < kDataNodes; ++i) data_[i] = startData(i, i == 0 ? 0 : dataProxies_[0]->port());

  std::vector<std::string> ids;
  for (std::size_t j = 0; j < kSentinels; ++j) ids.push_back(randomId());
  const std::string name = kMasterName;
  for (std::size_t j = 0; j < kSentinels; ++j) {
    test::RedisProcess::Options sentinel;
    sentinel.sentinel = true;
    sentinel.config = {"sentinel myid " + ids[j], "sentinel announce-ip 127.0.0.1",
                       "sentinel announce-port " + std::to_string(sentinelProxies_[j]->port()),
                       "sentinel monitor " + name + " 127.0.0.1 " + std::to_string(dataProxies_[0]->port()) + " 2",
                       "sentinel down-after-milliseconds " + name + " " + std::to_string(options_.downAfter.count()),
                       "sentinel failover-timeout " + name + " " + std::to_string(options_.failoverTimeout.count()),
                       "sentinel parallel-syncs " + name + " 1"};
    for (std::size_t i = 1; i < kDataNodes; ++i) {
      sentinel.config.push_back("sentinel known-replica " + name + " 127.0.0.1 " +
                                std::to_string(dataProxies_[i]->port()));
    }
    for (std::size_t other = 0; other < kSentinels; ++other) {
      if (other == j) continue;
      sentinel.config.push_back("sentinel known-sentinel " + name + " 127.0.0.1 " +
                                std::to_string(sentinelProxies_[other]->port()) + " " + ids[other]);
    }
    sentinels_.push_back(std::make_unique<test::RedisProcess>(sentinel));
    sentinelProxies_[j]->retarget(sentinels_[j]->port());
    for (auto& own : clientSentinels_) own[j]->retarget(sentinels_[j]->port());
  }
  waitHealthy(kHealBudget);
}

SentinelDeployment::~SentinelDeployment() = default;

std::unique_ptr<test::RedisProcess> SentinelDeployment::startData(std::size_t node, int masterProxyPort) {
  test::RedisProcess::Options server;
  server.config = {"repl-diskless-sync yes", "repl-diskless-sync-delay 0", "replica-announce-ip 127.0.0.1",
                   "replica-announce-port " + std::to_string(dataProxies_[node]->port())};
  if (masterProxyPort != 0) server.config.push_back("replicaof 127.0.0.1 " + std::to_string(masterProxyPort));
  if (!clocks_.empty()) server.env = clocks_.at(node)->environment();
  auto process = std::make_unique<test::RedisProcess>(server);
  dataProxies_[node]->retarget(process->port());
  for (auto& own : clientData_) own[node]->retarget(process->port());
  return process;
}

ServerClock& SentinelDeployment::clock(std::size_t node) {
  if (clocks_.empty()) throw std::logic_error("clock() needs a deployment made with fakeClocks");
  return *clocks_.at(node);
}

void SentinelDeployment::waitClockSeen(std::size_t node, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  const long long offset = clock(node).offset().count();
  std::string last = "not asked";
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      test::RedisClient client = direct(*data_.at(node));
      const long long serverSeconds = std::stoll(client.ok({"TIME"}).elements.at(0).str);
      const long long hostSeconds = std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch()).count();
      const std::string info = client.ok({"INFO", "replication"}).str;
      const auto field = info.find("master_last_io_seconds_ago:");
      const long long lastIo = field == std::string::npos ? -1 : std::stoll(info.substr(field + 27));
      if (std::llabs(serverSeconds - hostSeconds - offset) <= 1 && lastIo >= 0 && lastIo <= 1) return;
      last = "clock " + std::to_string(serverSeconds - hostSeconds) + " s off the host's, master_last_io " +
             std::to_string(lastIo) + " s";
    } catch (const std::exception& error) {
      last = error.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("sentinel deployment: node " + std::to_string(node) + " not on its clock's offset within " +
                           std::to_string(budget.count()) + " ms: " + last);
}

std::string SentinelDeployment::lockUri(std::size_t slot) const {
  std::string uri = "redis+sentinel://";
  for (std::size_t j = 0; j < kSentinels; ++j) uri += (j == 0 ? "" : ",") + clientSentinels_.at(slot)[j]->address();
  uri += std::string("/") + kMasterName + "?" + clientQuery();
  if (options_.waitReplicas > 0) {
    uri += "&wait_replicas=" + std::to_string(options_.waitReplicas) +
           "&wait_timeout=" + std::to_string(options_.waitTimeout.count()) + "ms";
  }
  return uri;
}

std::vector<std::string> SentinelDeployment::dataAddresses() const {
  std::vector<std::string> addresses;
  for (const auto& node : data_) {
    if (node) addresses.push_back(node->host() + ":" + std::to_string(node->port()));
  }
  return addresses;
}

std::vector<test::LinkProxy*> SentinelDeployment::clientLinks(std::size_t slot) {
  std::vector<test::LinkProxy*> links;
  for (auto& proxy : clientData_.at(slot)) links.push_back(proxy.get());
  for (auto& proxy : clientSentinels_.at(slot)) links.push_back(proxy.get());
  return links;
}

std::vector<test::LinkProxy*> SentinelDeployment::linksTo(std::size_t node) {
  std::vector<test::LinkProxy*> links{dataProxies_.at(node).get()};
  for (auto& own : clientData_) links.push_back(own.at(node).get());
  return links;
}

int SentinelDeployment::askMaster(std::size_t sentinel) {
  try {
    const test::Reply reply = direct(*sentinels_.at(sentinel)).command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", kMasterName});
    if (reply.elements.size() == 2) return std::stoi(reply.elements[1].str);
  } catch (const std::exception&) {
  }
  return 0;
}

std::size_t SentinelDeployment::nodeOfProxyPort(int port) const {
  for (std::size_t i = 0; i < kDataNodes; ++i) {
    if (dataProxies_[i]->port() == port) return i;
  }
  throw std::runtime_error("sentinel deployment: no data proxy on port " + std::to_string(port));
}

std::string SentinelDeployment::role(std::size_t node) {
  if (!running(node)) return "";
  try {
    const test::Reply reply = direct(*data_[node]).command({"ROLE"});
    return reply.elements.empty() ? "" : reply.elements[0].str;
  } catch (const std::exception&) {
    return "";
  }
}

std::size_t SentinelDeployment::master() {
  for (std::size_t j = 0; j < kSentinels; ++j) {
    if (const int port = askMaster(j); port != 0) return nodeOfProxyPort(port);
  }
  throw std::runtime_error("sentinel deployment: no sentinel names a master");
}

std::size_t SentinelDeployment::waitForNewMaster(std::size_t old, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (Steady::now() < deadline) {
    for (std::size_t j = 0; j < kSentinels; ++j) {
      const int port = askMaster(j);
      if (port == 0) continue;
      const std::size_t node = nodeOfProxyPort(port);
      if (node != old && role(node) == "master") return node;
    }
    std::this_thread::sleep_for(10ms);
  }
  throw std::runtime_error("sentinel deployment: no new master within " + std::to_string(budget.count()) + " ms");
}

bool SentinelDeployment::healthy(std::string& why) {
  try {
    const int named = askMaster(0);
    for (std::size_t j = 1; j < kSentinels; ++j) {
      if (askMaster(j) != named) {
        why = "the sentinels name different masters";
        return false;
      }
    }
    if (named == 0) {
      why = "no sentinel names a master";
      return false;
    }
    const std::size_t node = nodeOfProxyPort(named);
    if (role(node) != "master") {
      why = "the named master (node " + std::to_string(node) + ") is not a running master";
      return false;
    }
    // A write both replicas acknowledge: the stream of writes reaches them.
    test::RedisClient onMaster = direct(*data_[node]);
    (void)onMaster.ok({"SET", "nemesis-deployment:ready", "1"});
    const long long acknowledged = onMaster.ok({"WAIT", std::to_string(kDataNodes - 1), "100"}).integer;
    (void)onMaster.ok({"DEL", "nemesis-deployment:ready"});
    if (acknowledged != static_cast<long long>(kDataNodes - 1)) {
      why = "a write reached " + std::to_string(acknowledged) + " replicas";
      return false;
    }
    for (std::size_t j = 0; j < kSentinels; ++j) {
      test::RedisClient sentinel = direct(*sentinels_[j]);
      const auto seen = fields(sentinel.ok({"SENTINEL", "MASTER", kMasterName}));
      if (troubled(seen.at("flags")) || seen.at("num-slaves") != "2" || seen.at("num-other-sentinels") != "2") {
        why = "sentinel " + std::to_string(j) + " sees the master as flags=" + seen.at("flags") +
              " num-slaves=" + seen.at("num-slaves") + " num-other-sentinels=" + seen.at("num-other-sentinels");
        return false;
      }
      for (const auto& replica : sentinel.ok({"SENTINEL", "REPLICAS", kMasterName}).elements) {
        if (troubled(fields(replica).at("flags"))) {
          why = "sentinel " + std::to_string(j) + " sees a replica as " + fields(replica).at("flags");
          return false;
        }
      }
      for (const auto& other : sentinel.ok({"SENTINEL", "SENTINELS", kMasterName}).elements) {
        if (troubled(fields(other).at("flags"))) {
          why = "sentinel " + std::to_string(j) + " sees a sentinel as " + fields(other).at("flags");
          return false;
        }
      }
    }
  } catch (const std::exception& error) {
    why = error.what();
    return false;
  }
  return true;
}

void SentinelDeployment::waitHealthy(std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  std::string why;
  while (!healthy(why)) {
    if (Steady::now() >= deadline) {
      throw std::runtime_error("sentinel deployment: not healthy within " + std::to_string(budget.count()) + " ms: " + why);
    }
    std::this_thread::sleep_for(20ms);
  }
}

std::size_t SentinelDeployment::settledMaster(std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  std::string why = "not asked";
  while (Steady::now() < deadline) {
    try {
      const int named = askMaster(0);
      bool agreed = named != 0;
      for (std::size_t j = 0; j < kSentinels && agreed; ++j) {
        agreed = askMaster(j) == named &&
                 !troubled(fields(direct(*sentinels_[j]).ok({"SENTINEL", "MASTER", kMasterName})).at("flags"));
      }
      if (agreed && role(nodeOfProxyPort(named)) == "master") return nodeOfProxyPort(named);
      why = "the sentinels do not agree on a healthy master";
    } catch (const std::exception& error) {
      why = error.what();
    }
    std::this_thread::sleep_for(20ms);
  }
  throw std::runtime_error("sentinel deployment: no settled master within " + std::to_string(budget.count()) + " ms: " + why);
}

void SentinelDeployment::kill(std::size_t node) { data_.at(node).reset(); }

void SentinelDeployment::pause(std::size_t node) { data_.at(node)->pause(); }

void SentinelDeployment::resume(std::size_t node) { data_.at(node)->resume(); }

bool SentinelDeployment::running(std::size_t node) const { return data_.at(node) != nullptr; }

void SentinelDeployment::restartAsReplica(std::size_t node) {
  if (running(node)) throw std::logic_error("sentinel deployment: node " + std::to_string(node) + " is running");
  // The sentinels may still name the dead node until their failover is through.
  const std::size_t current = master() == node ? waitForNewMaster(node, kHealBudget) : master();
  data_[node] = startData(node, dataProxies_[current]->port());
}

void SentinelDeployment::delayReplication(std::chrono::milliseconds latency) {
  for (auto& proxy : dataProxies_) proxy->delayReplication(latency);
}

void SentinelDeployment::delayReplicationOf(std::size_t node, std::chrono::milliseconds latency) {
  // A replica opens with REPLCONF listening-port <its replica-announce-port>, as a RESP bulk string.
  const std::string port = std::to_string(dataProxies_.at(node)->port());
  const std::string marker = "listening-port\r\n$" + std::to_string(port.size()) + "\r\n" + port + "\r\n";
  for (auto& proxy : dataProxies_) proxy->delayReplicationOf(marker, latency);
}

void SentinelDeployment::passReplication() {
  for (auto& proxy : dataProxies_) proxy->passReplication();
}

void SentinelDeployment::heal() {
  for (auto& proxy : dataProxies_) proxy->pass();
  for (auto& proxy : sentinelProxies_) proxy->pass();
  for (test::LinkProxy* proxy : allClientLinks()) proxy->pass();
  for (std::size_t i = 0; i < kDataNodes; ++i) {
    if (!running(i)) restartAsReplica(i);
  }
  // A master cut off during a failover still thinks it is one; the sentinels would demote it only
  // after seeing it so for a while (8 s in Redis 7.0), so it is told at once — but only once the
  // sentinels agree on the master and no failover is under way, or a just-promoted replica would
  // be demoted in the middle of its promotion.
  const std::size_t current = settledMaster(kHealBudget);
  for (std::size_t i = 0; i < kDataNodes; ++i) {
    if (i != current && role(i) == "master") {
      (void)direct(*data_[i]).ok({"REPLICAOF", "127.0.0.1", std::to_string(dataProxies_[current]->port())});
    }
  }
  waitHealthy(kHealBudget);
}

}  // namespace dlock::nemesis
