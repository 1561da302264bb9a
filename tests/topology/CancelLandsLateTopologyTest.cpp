// SPDX-License-Identifier: Apache-2.0
// On Sentinel and Cluster too, an acquire its client gave up never takes the key, however long its
// bytes wait on the path: the timed-out connection to the key's master is closed there (CLIENT
// KILL) before the cancel. Every server sits behind a LinkProxy, and the ports the servers hand out
// (SENTINEL get-master-addr-by-name, CLUSTER SLOTS, MOVED) are rewritten into the proxies', so the
// client's every link passes one.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ClusterServers.h"
#include "SentinelServers.h"
#include "redis/src/FairScripts.h"
#include "LinkProxy.h"
#include "RedisClient.h"
#include "redis/src/Scripts.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::LinkProxy;
using dlock::test::RedisClient;
using dlock::test::SentinelServers;

namespace {

// A proxy per port, each rewriting every port into its proxy's in what the servers send back.
std::vector<std::unique_ptr<LinkProxy>> proxiesFor(const std::vector<int>& ports) {
  std::vector<std::unique_ptr<LinkProxy>> proxies;
  std::vector<std::pair<std::string, std::string>> rewrites;
  for (const int port : ports) {
    proxies.push_back(std::make_unique<LinkProxy>("127.0.0.1", port));
    rewrites.emplace_back(std::to_string(port), std::to_string(proxies.back()->port()));
    REQUIRE_MESSAGE(rewrites.back().first.size() == rewrites.back().second.size(),
                    "a server's port and its proxy's differ in length: a reply cannot be rewritten in place");
  }
  for (auto& proxy : proxies) proxy->rewriteReplies(rewrites);
  return proxies;
}

struct ProxiedCluster {
  ClusterServers cluster;
  std::vector<std::unique_ptr<LinkProxy>> proxies;

  ProxiedCluster() {
    std::vector<int> ports;
    for (std::size_t i = 0; i < cluster.size(); ++i) ports.push_back(cluster.port(i));
    proxies = proxiesFor(ports);
  }
  [[nodiscard]] std::string uri() const {
    return "redis+cluster://" + proxies[0]->address() + "," + proxies[1]->address() + "?command_timeout=500ms";
  }
};

// tryLock(key) once through `uri` while `path` holds the connection that sends `marker` (the
// acquire's script); `admin` reads the key's master. The held acquire is let through once the call
// gave up: the server must refuse it as late (DLOCKLATE), which no tombstone answers (a tombstone's
// refusal is a plain reply), so the refusal is the deadline's whatever the tombstone's lifetime.
void checkHeldAcquireNeverLands(const std::string& uri, LinkProxy& path, RedisClient& admin, bool fair,
                                const std::string& marker) {
  const auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).fair(fair).build();
  REQUIRE(lock->tryLock("k"));  // loads the scripts on the key's master: the held EVALSHA is the acquire
  lock->unlock("k");

  path.holdClientsSending(marker);
  REQUIRE_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
  path.release();
  CHECK(dlock::test::eventually([&] { return admin.errorReplies("DLOCKLATE") >= 1; }));  // it arrived, refused
  CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
  const bool free = dlock::test::onceRecovered([&] { return lock->tryLock("k"); });  // past the pool's back-off
  CHECK(free);
  if (free) lock->unlock("k");
}

}  // namespace

TEST_SUITE("CancelLandsLateTopology") {
  TEST_CASE("Cluster: an acquire held on the path past its cancel never takes the key, default and fair") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      ProxiedCluster set;
      const std::size_t owner = set.cluster.slotOwners()[dlock::clusterKeyNames("dlock:", "k").slot];
      RedisClient admin = set.cluster.client(owner);
      checkHeldAcquireNeverLands(set.uri(), *set.proxies[owner], admin, fair,
                                 fair ? dlock::detail::fairAcquireScript(true).sha : dlock::detail::acquireScript().sha);
    }
  }

  TEST_CASE("Sentinel: an acquire held on the path past its cancel never takes the key, default and fair") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      SentinelServers set;
      std::vector<int> ports;  // the data nodes, then the sentinels
      for (std::size_t i = 0; i < 3; ++i) ports.push_back(set.dataPort(i));
      for (std::size_t i = 0; i < 3; ++i) ports.push_back(set.sentinelPort(i));
      const auto proxies = proxiesFor(ports);
      std::string uri = set.uri("command_timeout=500ms");
      for (std::size_t i = 0; i < 3; ++i) {
        const std::string sentinel = "127.0.0.1:" + std::to_string(set.sentinelPort(i));
        uri.replace(uri.find(sentinel), sentinel.size(), proxies[3 + i]->address());
      }
      const std::size_t master = set.nodeOfPort(set.masterPort());
      RedisClient admin = set.dataClient(master);
      checkHeldAcquireNeverLands(uri, *proxies[master], admin, fair,
                                 fair ? dlock::detail::fairAcquireScript(false).sha : dlock::detail::acquireScript().sha);
    }
  }
}
