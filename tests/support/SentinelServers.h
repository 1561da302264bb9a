// SPDX-License-Identifier: Apache-2.0
// SentinelServers.h — a Redis Sentinel set owned by one test: one master and two replicas
// (redis-server) and three sentinels (redis-sentinel, quorum 2), all on free 127.0.0.1 ports,
// without persistence, each a RedisProcess. The same set scripts/sentinel-start makes, with the
// same settings, started here as children of the test process so that each server is killed and
// reaped by its pid (a script's servers end up nobody's children). directory() is a scratch
// directory for the test's own files.
//
// Failover timing, tuned for tests: a master silent for `downAfter` (default 1 s) is down; the
// failover timeout is `failoverTimeout` (default 3 s). Sentinels are configured with each other's
// ids and the replicas from the start, so the set is ready without waiting for discovery.
// Nodes are numbered: data nodes 0..2 (0 is the first master), sentinels 0..2. A missing
// redis-server/redis-sentinel or a set that does not come up is an error.
// Not thread-safe.
#pragma once

#include <sys/types.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "RedisClient.h"
#include "RedisProcess.h"

namespace dlock::test {

class SentinelServers {
 public:
  struct Options {
    std::string masterName = "mymaster";
    std::chrono::milliseconds downAfter{std::chrono::milliseconds(1000)};
    std::chrono::milliseconds failoverTimeout{std::chrono::milliseconds(3000)};
    // requirepass (and masterauth) on the data nodes; the sentinels get it as auth-pass.
    std::string dataPassword;
    // requirepass on the sentinels (and sentinel-pass, to talk to each other).
    std::string sentinelPassword;
    // TLS on every server (tls-replication yes: replication, and the sentinels' links to the
    // nodes and to each other); the sentinels name the TLS ports, uri() is rediss+sentinel://
    // trusting this CA. The plain ports stay for the checks' clients.
    std::optional<RedisProcess::Tls> tls;
  };

  static constexpr std::size_t kDataNodes = 3;
  static constexpr std::size_t kSentinels = 3;

  SentinelServers() : SentinelServers(Options{}) {}
  explicit SentinelServers(Options options);
  SentinelServers(const SentinelServers&) = delete;
  SentinelServers& operator=(const SentinelServers&) = delete;
  ~SentinelServers();  // SIGKILL and reap every server, remove the directory

  // redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/<name>[?query], without credentials
  // (rediss+sentinel:// over the TLS ports with Options::tls).
  [[nodiscard]] std::string uri(const std::string& query = "") const;
  [[nodiscard]] int dataPort(std::size_t node) const { return data_.at(node).process->port(); }
  // The port replicas and sentinels use to reach a data node: the TLS one with Options::tls.
  [[nodiscard]] int linkPort(std::size_t node) const {
    return options_.tls ? data_.at(node).process->tlsPort() : dataPort(node);
  }
  [[nodiscard]] int sentinelPort(std::size_t sentinel) const { return sentinels_.at(sentinel).process->port(); }
  [[nodiscard]] const std::string& directory() const { return dir_; }

  // The master port the first answering live sentinel names.
  [[nodiscard]] int masterPort();
  // The data node listening on `port` (plain or TLS).
  [[nodiscard]] std::size_t nodeOfPort(int port) const;
  // Waits until a live sentinel names a master other than `oldPort` whose ROLE says master, and
  // returns its port; std::runtime_error after `budget`.
  int waitForMasterOtherThan(int oldPort, std::chrono::milliseconds budget);
  // Waits until every live sentinel names `port` as the master.
  void waitForAllSentinelsToName(int port, std::chrono::milliseconds budget);
  // ROLE of a data node: "master", "slave", or "" when it does not answer.
  [[nodiscard]] std::string role(std::size_t node);

  // SIGKILL (and reap); SIGSTOP / SIGCONT.
  void killData(std::size_t node) { stop(data_.at(node)); }
  void pauseData(std::size_t node) { signal(data_.at(node), /*pause=*/true); }
  void resumeData(std::size_t node) { signal(data_.at(node), /*pause=*/false); }
  void killSentinel(std::size_t sentinel) { stop(sentinels_.at(sentinel)); }
  void pauseSentinel(std::size_t sentinel) { signal(sentinels_.at(sentinel), /*pause=*/true); }

  // SENTINEL FAILOVER <name> through one sentinel: a graceful failover.
  void failover(std::size_t sentinel = 0);

  // Clients for checks, authenticated when the set has passwords.
  [[nodiscard]] RedisClient dataClient(std::size_t node, std::chrono::milliseconds timeout = std::chrono::seconds(2));
  [[nodiscard]] RedisClient sentinelClient(std::size_t sentinel,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(2));

  // The last lines of every server's log, for failure messages.
  [[nodiscard]] std::string logTails() const;

 private:
  struct Node {
    std::string name;  // "data-0", "sentinel-1"
    std::unique_ptr<RedisProcess> process;
    bool paused = false;
  };

  void startData();
  void startSentinels();
  void waitUntilReady(std::chrono::milliseconds budget);
  bool ready(std::string& why);
  void stop(Node& node);
  void signal(Node& node, bool pause);
  [[nodiscard]] static bool live(const Node& node) {
    return node.process && node.process->running() && !node.paused;
  }
  [[nodiscard]] int askMaster(std::size_t sentinel);  // 0 when it does not answer

  Options options_;
  std::string dir_;
  std::array<Node, kDataNodes> data_;
  std::array<Node, kSentinels> sentinels_;
};

}  // namespace dlock::test
