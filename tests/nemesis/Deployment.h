// SPDX-License-Identifier: Apache-2.0
// Deployment.h — the Redis servers of one fault-test run, each behind a LinkProxy so that a
// nemesis reaches every link without root, plus the fault-free store the clients write to.
//
//   SingleDeployment   one redis-server (optionally with AOF, optionally with a movable clock)
//   RedlockDeployment  five independent redis-servers
//   SentinelDeployment (SentinelDeployment.h), ClusterDeployment (ClusterDeployment.h)
//
// Each client slot has its own proxy in front of every server, so a nemesis can cut one client
// off while the others go on (the partition that lets another client take a key). A deployment
// gives each client its URI (through its proxies), the nemesis its levers (the proxies and the
// server processes), and the checker the servers to scan at the end.
// Owner: the runner. Not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "LinkProxy.h"
#include "RedisProcess.h"

namespace dlock::nemesis {

// How the lock servers keep their data across a SIGKILL.
enum class Persistence { none, appendEverySecond, appendAlways };

class Deployment {
 public:
  explicit Deployment(std::size_t clients) : clients_(clients) {}
  virtual ~Deployment() = default;

  [[nodiscard]] std::size_t clients() const { return clients_; }

  [[nodiscard]] virtual std::string topology() const = 0;
  // What the client in `slot` connects to: every host one of its proxies.
  [[nodiscard]] virtual std::string lockUri(std::size_t slot) const = 0;
  // host:port of each data server the lock writes to, directly (the end-of-run key scan).
  [[nodiscard]] virtual std::vector<std::string> dataAddresses() const = 0;
  // Every data server a lock key may live on during the run, whatever its role now (the server
  // observers watch them all, ServerObserver.h).
  [[nodiscard]] virtual std::vector<std::string> observedAddresses() const { return dataAddresses(); }
  // The proxies between the client in `slot` and the servers.
  [[nodiscard]] virtual std::vector<test::LinkProxy*> clientLinks(std::size_t slot) = 0;
  // Every client's.
  [[nodiscard]] std::vector<test::LinkProxy*> allClientLinks();
  // Every proxy back to pass and every server running again: the state a scenario starts from.
  virtual void heal() = 0;

  // The fault-free store of the fenced writes and the unfenced counters.
  [[nodiscard]] test::RedisProcess& store() { return store_; }

 private:
  std::size_t clients_;
  test::RedisProcess store_;
};

// A server's movable wall clock: a file that ClockShift.c, preloaded into the server, re-reads
// within 50 ms. The offset stays until set again; the file goes with the object.
class ServerClock {
 public:
  explicit ServerClock(const std::string& name);
  ServerClock(const ServerClock&) = delete;
  ServerClock& operator=(const ServerClock&) = delete;
  ~ServerClock();

  // The server's wall clock `offset` from the host's (negative: behind).
  void set(std::chrono::seconds offset);
  [[nodiscard]] std::chrono::seconds offset() const { return offset_; }
  // What a server's environment needs to follow this clock.
  [[nodiscard]] std::vector<std::pair<std::string, std::string>> environment() const;

 private:
  std::string file_;
  std::chrono::seconds offset_{0};
};

// One redis-server behind the proxies; with ClockShift.c preloaded when asked, so that a nemesis
// can move its wall clock (clock()) without touching the host's.
class SingleDeployment : public Deployment {
 public:
  struct Options {
    Persistence persistence = Persistence::none;
    bool fakeClock = false;
  };

  SingleDeployment(std::size_t clients, Options options);

  [[nodiscard]] std::string topology() const override { return "single"; }
  [[nodiscard]] std::string lockUri(std::size_t slot) const override;
  [[nodiscard]] std::vector<std::string> dataAddresses() const override;
  [[nodiscard]] std::vector<test::LinkProxy*> clientLinks(std::size_t slot) override { return {proxies_.at(slot).get()}; }
  void heal() override;

  [[nodiscard]] test::RedisProcess& server() { return *server_; }
  // The server's wall clock, when made with fakeClock. heal() leaves it where it is: a clock moved
  // back to the host's would itself be a jump.
  [[nodiscard]] ServerClock& clock();

 private:
  Options options_;
  std::unique_ptr<ServerClock> clock_;
  std::unique_ptr<test::RedisProcess> server_;
  std::vector<std::unique_ptr<test::LinkProxy>> proxies_;  // one per client slot
};

// Five independent redis-servers, each behind its own proxy: redlock://p1,p2,... .
class RedlockDeployment : public Deployment {
 public:
  static constexpr std::size_t kNodes = 5;

  // `fakeClock`: each node with ClockShift.c preloaded, its wall clock movable by clock(node).
  explicit RedlockDeployment(std::size_t clients, bool fakeClock = false);

  [[nodiscard]] std::string topology() const override { return "redlock"; }
  [[nodiscard]] std::string lockUri(std::size_t slot) const override;
  [[nodiscard]] std::vector<std::string> dataAddresses() const override;
  [[nodiscard]] std::vector<test::LinkProxy*> clientLinks(std::size_t slot) override;
  void heal() override;

  [[nodiscard]] test::RedisProcess& server(std::size_t node) { return *servers_.at(node); }
  // Every client's proxy in front of `node`: the node cut off from all of them.
  [[nodiscard]] std::vector<test::LinkProxy*> nodeLinks(std::size_t node);
  // `node`'s wall clock, when made with fakeClock. heal() leaves the clocks where they are.
  [[nodiscard]] ServerClock& clock(std::size_t node);

 private:
  std::vector<std::unique_ptr<ServerClock>> clocks_;  // one per node, when fakeClock
  std::vector<std::unique_ptr<test::RedisProcess>> servers_;
  std::vector<std::vector<std::unique_ptr<test::LinkProxy>>> proxies_;  // [slot][node]
};

// Timeouts for clients of a proxied deployment: short enough that a blackholed link fails a
// command well within a lease, so that faults show as errors rather than as hangs.
std::string clientQuery();

}  // namespace dlock::nemesis
