// SPDX-License-Identifier: Apache-2.0
// A lock's conditions on a Redis Cluster: signals over sharded pub/sub and fair moves on every
// master, every script's keys in the key's slot (a key starting with '}' too), and one renewal
// batch across slots.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ClusterServers.h"
#include "ConditionScenarios.h"
#include "RedisClient.h"
#include "TestHelpers.h"
#include "dlock/IConditionOperator.h"
#include "dlock/IFairOperator.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
namespace cond = dlock::test::cond;

TEST_SUITE("ConditionTopology") {
  TEST_CASE("Cluster: signals over sharded pub/sub and fair moves on every master, one renewal batch across slots") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    REQUIRE(masters.size() == 3);
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(cluster.uri());
    cond::Backends backends{*backend, dynamic_cast<dlock::IFairOperator&>(*backend),
                            dynamic_cast<dlock::IConditionOperator&>(*backend)};
    std::vector<std::string> keys;
    for (const std::size_t master : masters) {
      std::string key;
      for (int i = 0; key.empty(); ++i) {
        const std::string candidate = "cond-" + std::to_string(i);
        if (owners[dlock::clusterKeyNames("dlock:", candidate).slot] == master) key = candidate;
      }
      CAPTURE(key);
      keys.push_back(key);
      cond::awaitReleasesAndJoinsAtOnce(backends, key);  // the signal heard over SSUBSCRIBE
      cond::aSignalMovesTheLongestWaiterIntoTheFairQueue(backends, key);
      RedisClient owner = cluster.client(master);
      dlock::test::checkEveryLockKeyHasTtl(owner);
    }
    // One renewal batch over waiters on three masters: one script per slot, each renewed.
    std::vector<dlock::ConditionWaiter> waiters;
    for (const auto& key : keys) {
      REQUIRE(cond::holdThenAwait(backends, key, cond::kT3).awaiting);
      waiters.push_back({key, cond::kName, cond::kT3, 10s});
    }
    waiters.push_back({keys.front(), cond::kName, cond::kT4, 10s});  // not waiting there
    const std::vector<dlock::ExtendResult> renewed = backends.conditions.renewAwaitAll(waiters, 60s);
    REQUIRE(renewed.size() == 4);
    for (std::size_t i = 0; i < 3; ++i) CHECK(renewed[i].extended);
    CHECK_FALSE(renewed[3].extended);
    for (const auto& key : keys) CHECK(backends.conditions.inspectCondition(key, cond::kName).waiters.at(0).remaining > 10s);
    // A key starting with '}' gets the cluster's hashed names: every script still runs in one slot.
    cond::aSignalMovesTheLongestWaiterIntoTheFairQueue(backends, "}odd{");
    cond::awaitReleasesAndJoinsAtOnce(backends, "}odd{x");
  }
}
