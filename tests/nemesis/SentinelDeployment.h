// SPDX-License-Identifier: Apache-2.0
// SentinelDeployment.h — a master, two replicas and three sentinels (quorum 2), every link through
// a LinkProxy: data node i announces its proxy D_i (replicas replicate through D_master, sentinels
// and clients reach it through D_i), sentinel j announces its proxy S_j. The proxies are shared by
// every client: the master the sentinels hand out is a D_i. The replication links inside the D_i
// can be delayed or cut alone (LinkProxy::delayReplication), so a lock can be acknowledged by the
// master and lost with it. Restarted nodes come back as replicas of the master the sentinels name.
// Each client has links of its own: a proxy per data node and per sentinel, the latter rewriting
// the D_i and S_j ports in what the sentinels answer into that client's own proxies' ports. A
// partition can therefore leave some clients with the old master and others with the new one
// (split brain), while the sentinels and replicas reach each other through D_i and S_j.
// Owner: the runner, or dlock_failover_trials. Not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "Deployment.h"

namespace dlock::nemesis {

class SentinelDeployment : public Deployment {
 public:
  static constexpr std::size_t kDataNodes = 3;
  static constexpr std::size_t kSentinels = 3;

  struct Options {
    std::size_t waitReplicas = 0;  // the clients' wait_replicas; 0: off
    std::chrono::milliseconds waitTimeout{200};
    std::chrono::milliseconds downAfter{1000};
    std::chrono::milliseconds failoverTimeout{3000};
    // Each data node with ClockShift.c preloaded, its wall clock movable by clock(node); the
    // sentinels keep the host's (a sentinel whose clock jumps enters TILT mode).
    bool fakeClocks = false;
  };

  SentinelDeployment(std::size_t clients, Options options);
  ~SentinelDeployment() override;

  [[nodiscard]] std::string topology() const override { return "sentinel"; }
  [[nodiscard]] std::string lockUri(std::size_t slot) const override;
  [[nodiscard]] std::vector<std::string> dataAddresses() const override;
  // The client's own proxies: one per data node, one per sentinel.
  [[nodiscard]] std::vector<test::LinkProxy*> clientLinks(std::size_t slot) override;
  // Every proxy passing, every node running (the dead ones as replicas of the named master, a
  // stray master demoted), and the set healthy (waitHealthy).
  void heal() override;

  // The data node the sentinels name as master (asked directly, not through the proxies).
  [[nodiscard]] std::size_t master();
  // Waits until a sentinel names a running node other than `old` that answers ROLE as master.
  std::size_t waitForNewMaster(std::size_t old, std::chrono::milliseconds budget);
  // Waits until every sentinel names the same master, it streams writes to both replicas (WAIT),
  // and every sentinel sees both replicas and the other sentinels as healthy.
  void waitHealthy(std::chrono::milliseconds budget);

  void kill(std::size_t node);
  // SIGSTOP / SIGCONT of a running data node: it stops answering, its connections stay open.
  void pause(std::size_t node);
  void resume(std::size_t node);
  [[nodiscard]] bool running(std::size_t node) const;
  // A new server for a dead node, replicating the master the sentinels name (waited for).
  void restartAsReplica(std::size_t node);

  // The link the sentinels and replicas use to reach `node`.
  [[nodiscard]] test::LinkProxy& dataLink(std::size_t node) { return *dataProxies_.at(node); }
  // Client `slot`'s own link to `node`.
  [[nodiscard]] test::LinkProxy& clientDataLink(std::size_t slot, std::size_t node) {
    return *clientData_.at(slot).at(node);
  }
  // Every link to `node`: the sentinels' and replicas', and each client's.
  [[nodiscard]] std::vector<test::LinkProxy*> linksTo(std::size_t node);
  // Delay or cut every replication link, or pass them again.
  void delayReplication(std::chrono::milliseconds latency);
  // Delays only the replication link of replica `node` (whichever master it follows).
  void delayReplicationOf(std::size_t node, std::chrono::milliseconds latency);
  void passReplication();
  // Data node `node`'s wall clock, when made with fakeClocks; a restarted node keeps it.
  [[nodiscard]] ServerClock& clock(std::size_t node);
  // Waits until replica `node` runs on its clock's offset: TIME shows it, and the replica has
  // heard from its master since (master_last_io_seconds_ago at most 1), so the time it keeps
  // for its master link is on the new clock too.
  void waitClockSeen(std::size_t node, std::chrono::milliseconds budget);

 private:
  std::unique_ptr<test::RedisProcess> startData(std::size_t node, int masterProxyPort);
  // The port a sentinel names, 0 when it names none or does not answer.
  int askMaster(std::size_t sentinel);
  std::size_t nodeOfProxyPort(int port) const;
  [[nodiscard]] std::string role(std::size_t node);
  bool healthy(std::string& why);
  // The master every sentinel names, once none sees it down or failing over.
  std::size_t settledMaster(std::chrono::milliseconds budget);

  Options options_;
  std::vector<std::unique_ptr<test::LinkProxy>> dataProxies_;      // D_i
  std::vector<std::unique_ptr<test::LinkProxy>> sentinelProxies_;  // S_j
  std::vector<std::vector<std::unique_ptr<test::LinkProxy>>> clientData_;       // [slot][node]
  std::vector<std::vector<std::unique_ptr<test::LinkProxy>>> clientSentinels_;  // [slot][sentinel]
  std::vector<std::unique_ptr<ServerClock>> clocks_;               // one per data node, when fakeClocks
  std::vector<std::unique_ptr<test::RedisProcess>> data_;          // null while dead
  std::vector<std::unique_ptr<test::RedisProcess>> sentinels_;
};

}  // namespace dlock::nemesis
