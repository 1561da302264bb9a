// SPDX-License-Identifier: Apache-2.0
#include "SentinelServers.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "RedisProcess.h"

namespace dlock::test {
namespace {

using Steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string randomId() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device device;
  std::string id;
  for (int i = 0; i < 40; ++i) id += kHex[device() % 16];
  return id;
}

std::string tail(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

// A flat RESP2 array of alternating names and values, as SENTINEL MASTER answers.
std::map<std::string, std::string> fields(const Reply& reply) {
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < reply.elements.size(); i += 2) out[reply.elements[i].str] = reply.elements[i + 1].str;
  return out;
}

}  // namespace

SentinelServers::SentinelServers(Options options) : options_(std::move(options)) {
  char pattern[] = "/tmp/dlock-sentinel-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = pattern;
  try {
    startData();
    startSentinels();
    waitUntilReady(60s);  // about a second when idle; generous for a busy machine
  } catch (...) {
    for (auto& node : sentinels_) stop(node);
    for (auto& node : data_) stop(node);
    throw;
  }
}

SentinelServers::~SentinelServers() {
  for (auto& node : sentinels_) stop(node);
  for (auto& node : data_) stop(node);
  const char* keep = std::getenv("DLOCK_TEST_KEEP_DIRS");
  if (keep == nullptr || std::strcmp(keep, "1") != 0) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

std::string SentinelServers::uri(const std::string& query) const {
  std::string text = options_.tls ? "rediss+sentinel://" : "redis+sentinel://";
  for (std::size_t i = 0; i < kSentinels; ++i) {
    if (i > 0) text += ",";
    text += "127.0.0.1:" + std::to_string(options_.tls ? sentinels_.at(i).process->tlsPort() : sentinelPort(i));
  }
  text += "/" + options_.masterName;
  std::string all = query;
  if (options_.tls) all += (all.empty() ? "" : "&") + std::string("tls_ca_file=") + options_.tls->caFile;
  if (!all.empty()) text += "?" + all;
  return text;
}

void SentinelServers::startData() {
  for (std::size_t i = 0; i < kDataNodes; ++i) {
    RedisProcess::Options node;
    node.config = {"repl-diskless-sync yes", "repl-diskless-sync-delay 0", "replica-announce-ip 127.0.0.1"};
    if (!options_.dataPassword.empty()) {
      node.config.push_back("requirepass " + options_.dataPassword);
      node.config.push_back("masterauth " + options_.dataPassword);
    }
    if (options_.tls) {
      node.tls = options_.tls;
      node.config.push_back("tls-replication yes");
    }
    if (i > 0) node.config.push_back("replicaof 127.0.0.1 " + std::to_string(linkPort(0)));
    data_[i].name = "data-" + std::to_string(i);
    data_[i].process = std::make_unique<RedisProcess>(node);
  }
}

void SentinelServers::startSentinels() {
  const std::string& name = options_.masterName;
  // Each sentinel's config names the others' ports and ids: a port taken before its sentinel
  // could bind it means starting all three again on new ports.
  for (int attempt = 0;; ++attempt) {
    std::array<std::string, kSentinels> ids;
    std::array<int, kSentinels> ports{};
    for (std::size_t i = 0; i < kSentinels; ++i) {
      ids[i] = randomId();
      // Never a data node's port either: a sentinel once drew the master's (its bind failed, and
      // the set started again never came up).
      const auto taken = [&](int port) {
        for (std::size_t node = 0; node < kDataNodes; ++node) {
          if (port == dataPort(node) || port == data_.at(node).process->tlsPort()) return true;
        }
        return std::find(ports.begin(), ports.begin() + static_cast<std::ptrdiff_t>(i), port) !=
               ports.begin() + static_cast<std::ptrdiff_t>(i);
      };
      do {
        ports[i] = freeLoopbackPort();
      } while (taken(ports[i]));
    }
    try {
      for (std::size_t i = 0; i < kSentinels; ++i) {
        RedisProcess::Options node;
        node.sentinel = true;
        node.port = ports[i];
        node.config = {"sentinel myid " + ids[i], "sentinel announce-ip 127.0.0.1"};
        if (options_.tls) {
          node.tls = options_.tls;
          node.config.push_back("tls-replication yes");
        }
        if (!options_.sentinelPassword.empty()) {
          node.config.push_back("requirepass " + options_.sentinelPassword);
          node.config.push_back("sentinel sentinel-pass " + options_.sentinelPassword);
        }
        node.config.push_back("sentinel monitor " + name + " 127.0.0.1 " + std::to_string(linkPort(0)) + " 2");
        if (!options_.dataPassword.empty()) {
          node.config.push_back("sentinel auth-pass " + name + " " + options_.dataPassword);
        }
        const std::string downAfter = std::to_string(options_.downAfter.count());
        const std::string failoverTimeout = std::to_string(options_.failoverTimeout.count());
        node.config.push_back("sentinel down-after-milliseconds " + name + " " + downAfter);
        node.config.push_back("sentinel failover-timeout " + name + " " + failoverTimeout);
        node.config.push_back("sentinel parallel-syncs " + name + " 1");
        for (std::size_t r = 1; r < kDataNodes; ++r) {
          node.config.push_back("sentinel known-replica " + name + " 127.0.0.1 " + std::to_string(linkPort(r)));
        }
        // Over TLS the others' TLS ports are not known before they start: they find each other
        // through the master's hello channel instead.
        for (std::size_t other = 0; other < kSentinels && !options_.tls; ++other) {
          if (other == i) continue;
          node.config.push_back("sentinel known-sentinel " + name + " 127.0.0.1 " + std::to_string(ports[other]) + " " +
                                ids[other]);
        }
        sentinels_[i].name = "sentinel-" + std::to_string(i);
        sentinels_[i].process = std::make_unique<RedisProcess>(node);
      }
      return;
    } catch (const std::exception&) {
      for (auto& node : sentinels_) node.process.reset();
      if (attempt == 2) throw;
    }
  }
}

bool SentinelServers::ready(std::string& why) {
  try {
    // Both replicas online as the master sees them (WAIT counts only those), and in sync.
    const std::string replication = dataClient(0, 500ms).ok({"INFO", "replication"}).str;
    std::size_t online = 0;
    for (auto at = replication.find("state=online"); at != std::string::npos;
         at = replication.find("state=online", at + 1)) {
      ++online;
    }
    if (online != kDataNodes - 1) {
      why = "the master sees " + std::to_string(online) + " replicas online";
      return false;
    }
    // "online" comes before the replica's first acknowledgement starts the stream of writes: only
    // a write both replicas acknowledge shows that writes reach them.
    RedisClient first = dataClient(0, 500ms);
    (void)first.ok({"SET", "dlock-topology:ready", "1"});
    const long long acknowledged = first.ok({"WAIT", std::to_string(kDataNodes - 1), "100"}).integer;
    (void)first.ok({"DEL", "dlock-topology:ready"});
    if (acknowledged != static_cast<long long>(kDataNodes - 1)) {
      why = "a write reached " + std::to_string(acknowledged) + " replicas";
      return false;
    }
    for (std::size_t r = 1; r < kDataNodes; ++r) {
      const std::string info = dataClient(r, 500ms).ok({"INFO", "replication"}).str;
      if (info.find("master_link_status:up") == std::string::npos) {
        why = data_[r].name + " is not in sync with its master yet";
        return false;
      }
    }
    for (std::size_t s = 0; s < kSentinels; ++s) {
      RedisClient client = sentinelClient(s, 500ms);
      const auto master = fields(client.ok({"SENTINEL", "MASTER", options_.masterName}));
      if (master.at("flags") != "master" || master.at("num-slaves") != "2" || master.at("num-other-sentinels") != "2") {
        why = sentinels_[s].name + " sees the master as flags=" + master.at("flags") +
              " num-slaves=" + master.at("num-slaves") + " num-other-sentinels=" + master.at("num-other-sentinels");
        return false;
      }
      for (const auto& replica : client.ok({"SENTINEL", "REPLICAS", options_.masterName}).elements) {
        if (fields(replica).at("flags") != "slave") {
          why = sentinels_[s].name + " sees a replica as " + fields(replica).at("flags");
          return false;
        }
      }
      for (const auto& other : client.ok({"SENTINEL", "SENTINELS", options_.masterName}).elements) {
        if (fields(other).at("flags") != "sentinel") {
          why = sentinels_[s].name + " sees a sentinel as " + fields(other).at("flags");
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

void SentinelServers::waitUntilReady(std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  std::string why;
  while (!ready(why)) {
    if (Steady::now() >= deadline) {
      throw std::runtime_error("the sentinel set in " + dir_ + " did not come up: " + why + "\n" + logTails());
    }
    std::this_thread::sleep_for(20ms);
  }
}

void SentinelServers::stop(Node& node) {
  if (node.process) node.process->kill();
  node.paused = false;
}

void SentinelServers::signal(Node& node, bool pause) {
  if (!node.process || !node.process->running()) throw std::runtime_error(node.name + " is not running");
  if (pause) {
    node.process->pause();
  } else {
    node.process->resume();
  }
  node.paused = pause;
}

int SentinelServers::askMaster(std::size_t sentinel) {
  if (!live(sentinels_[sentinel])) return 0;
  try {
    const Reply reply =
        sentinelClient(sentinel, 500ms).command({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.masterName});
    if (reply.elements.size() == 2) return std::stoi(reply.elements[1].str);
  } catch (const std::exception&) {
  }
  return 0;
}

int SentinelServers::masterPort() {
  for (std::size_t s = 0; s < kSentinels; ++s) {
    if (const int port = askMaster(s); port != 0) return port;
  }
  throw std::runtime_error("no live sentinel names a master");
}

std::size_t SentinelServers::nodeOfPort(int port) const {
  for (std::size_t i = 0; i < kDataNodes; ++i) {
    if (dataPort(i) == port || data_.at(i).process->tlsPort() == port) return i;
  }
  throw std::runtime_error("no data node has port " + std::to_string(port));
}

std::string SentinelServers::role(std::size_t node) {
  if (!live(data_.at(node))) return "";
  try {
    const Reply reply = dataClient(node, 500ms).command({"ROLE"});
    return reply.elements.empty() ? "" : reply.elements[0].str;
  } catch (const std::exception&) {
    return "";
  }
}

int SentinelServers::waitForMasterOtherThan(int oldPort, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (Steady::now() < deadline) {
    for (std::size_t s = 0; s < kSentinels; ++s) {
      const int port = askMaster(s);
      if (port != 0 && port != oldPort && role(nodeOfPort(port)) == "master") return port;
    }
    std::this_thread::sleep_for(10ms);
  }
  throw std::runtime_error("no sentinel named a new master within " + std::to_string(budget.count()) + " ms\n" +
                           logTails());
}

void SentinelServers::waitForAllSentinelsToName(int port, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (Steady::now() < deadline) {
    bool all = true;
    for (std::size_t s = 0; s < kSentinels; ++s) {
      if (live(sentinels_[s]) && askMaster(s) != port) all = false;
    }
    if (all) return;
    std::this_thread::sleep_for(20ms);
  }
  throw std::runtime_error("not every live sentinel named port " + std::to_string(port) + " within " +
                           std::to_string(budget.count()) + " ms\n" + logTails());
}

void SentinelServers::failover(std::size_t sentinel) {
  (void)sentinelClient(sentinel).ok({"SENTINEL", "FAILOVER", options_.masterName});
}

RedisClient SentinelServers::dataClient(std::size_t node, std::chrono::milliseconds timeout) {
  RedisClient client("127.0.0.1", dataPort(node), timeout);
  if (!options_.dataPassword.empty()) (void)client.ok({"AUTH", options_.dataPassword});
  return client;
}

RedisClient SentinelServers::sentinelClient(std::size_t sentinel, std::chrono::milliseconds timeout) {
  RedisClient client("127.0.0.1", sentinelPort(sentinel), timeout);
  if (!options_.sentinelPassword.empty()) (void)client.ok({"AUTH", options_.sentinelPassword});
  return client;
}

std::string SentinelServers::logTails() const {
  std::ostringstream out;
  for (const auto& node : data_) {
    if (node.process) out << "--- " << node.name << "\n" << tail(node.process->directory() + "/redis.log", 8);
  }
  for (const auto& node : sentinels_) {
    if (node.process) out << "--- " << node.name << "\n" << tail(node.process->directory() + "/redis.log", 12);
  }
  return out.str();
}

}  // namespace dlock::test
