// SPDX-License-Identifier: Apache-2.0
// The semaphore on a Redis Cluster: every key of one semaphore in its name's slot, admissions
// told over sharded pub/sub.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>

#include "ClusterServers.h"
#include "RedisClient.h"
#include "SemaphoreScenarios.h"
#include "TestHelpers.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
namespace sem = dlock::test::sem;

TEST_SUITE("SemaphoreTopology") {
  TEST_CASE("Cluster: a semaphore's keys share its name's slot, and admissions are told over sharded pub/sub") {
    ClusterServers cluster;
    auto backend = dlock::connect(cluster.uri());
    auto& semaphore = dynamic_cast<dlock::ISemaphoreOperator&>(*backend);
    for (const std::string name : {"pool", "}odd{"}) {  // '}' first: the cluster's hashed names
      CAPTURE(name);
      sem::aReleaseOfThreeAdmitsThreeWaiters(semaphore, name);  // each script ran in one slot
      REQUIRE_FALSE(semaphore.acquirePermits(name, sem::token('e'), 1, 3, 10s, 5s).acquired);  // a queue too
      const std::uint16_t slot = dlock::clusterKeyNames("dlock:", name).slot;
      RedisClient owner = cluster.client(cluster.ownerOf(slot));
      const auto keys = owner.ok({"CLUSTER", "GETKEYSINSLOT", std::to_string(slot), "100"}).elements;
      std::size_t semaphoreKeys = 0;
      for (const auto& key : keys) {
        if (key.str.find(":sem:") == std::string::npos) continue;
        ++semaphoreKeys;
        CHECK(owner.ok({"CLUSTER", "KEYSLOT", key.str}).integer == slot);
      }
      CHECK(semaphoreKeys == 3);  // state, deadlines and queue
      dlock::test::checkEveryLockKeyHasTtl(owner);
    }
  }
}
