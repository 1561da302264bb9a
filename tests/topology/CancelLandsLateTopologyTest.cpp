// SPDX-License-Identifier: Apache-2.0
// On a Cluster too, an acquire its client gave up never takes the key, however long its bytes wait
// on the path: the timed-out connection to the key's master is closed there (CLIENT KILL) before
// the cancel. Every node sits behind a LinkProxy, and the ports the nodes hand out (CLUSTER SLOTS,
// MOVED) are rewritten into the proxies', so the client's every link passes one.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ClusterServers.h"
#include "FairScripts.h"
#include "LinkProxy.h"
#include "RedisClient.h"
#include "Scripts.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::LinkProxy;
using dlock::test::RedisClient;

namespace {

struct ProxiedCluster {
  ClusterServers cluster;
  std::vector<std::unique_ptr<LinkProxy>> proxies;

  ProxiedCluster() {
    std::vector<std::pair<std::string, std::string>> rewrites;
    for (std::size_t i = 0; i < cluster.size(); ++i) {
      proxies.push_back(std::make_unique<LinkProxy>("127.0.0.1", cluster.port(i)));
      rewrites.emplace_back(std::to_string(cluster.port(i)), std::to_string(proxies.back()->port()));
      REQUIRE_MESSAGE(rewrites.back().first.size() == rewrites.back().second.size(),
                      "a node's port and its proxy's differ in length: a reply cannot be rewritten in place");
    }
    for (auto& proxy : proxies) proxy->rewriteReplies(rewrites);
  }
  [[nodiscard]] std::string uri() const {
    return "redis+cluster://" + proxies[0]->address() + "," + proxies[1]->address() + "?command_timeout=500ms";
  }
};

long long keysBesidesFence(RedisClient& owner, const std::string& key) {
  long long count = 0;
  for (const auto& name : owner.ok({"KEYS", "dlock:{" + key + "}*"}).elements) {
    if (name.str != "dlock:{" + key + "}:fence") ++count;
  }
  return count;
}

void checkHeldAcquireNeverLands(bool fair, const std::string& marker) {
  ProxiedCluster set;
  const std::size_t owner = set.cluster.slotOwners()[dlock::clusterKeyNames("dlock:", "k").slot];
  RedisClient admin = set.cluster.client(owner);
  const auto lock = dlock::LockBuilder().backend(dlock::connect(set.uri())).fair(fair).build();
  REQUIRE(lock->tryLock("k"));  // loads the scripts on the key's master: the held EVALSHA is the acquire
  lock->unlock("k");

  LinkProxy& path = *set.proxies[owner];
  path.holdClientsSending(marker);
  REQUIRE_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
  // The cancel's tombstone ends; the acquire still waits on the path.
  REQUIRE(dlock::test::eventually([&] { return keysBesidesFence(admin, "k") == 0; }));
  const bool closedOnServer = path.waitUntilNoneHeld(dlock::test::kEventBudget);
  path.release();
  if (!closedOnServer) {  // show what the late acquire does
    CHECK_FALSE(dlock::test::eventually([&] { return admin.ok({"EXISTS", "dlock:{k}"}).integer == 1; }, 5s));
  }
  CHECK(closedOnServer);
  CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
  const bool free = lock->tryLock("k");
  CHECK(free);
  if (free) lock->unlock("k");
}

}  // namespace

TEST_SUITE("CancelLandsLateTopology") {
  TEST_CASE("Cluster: an acquire held on the path past its cancel never takes the key, default and fair") {
    checkHeldAcquireNeverLands(false, dlock::detail::acquireScript().sha);
    checkHeldAcquireNeverLands(true, dlock::detail::fairAcquireScript(true).sha);
  }
}
