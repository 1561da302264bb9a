// SPDX-License-Identifier: Apache-2.0
// The semaphore on a Redis Cluster: every key of one semaphore in its name's slot, admissions
// told over sharded pub/sub; and the Semaphore (SemaphoreBuilder) on Sentinel and Cluster: a
// release admits the waiting threads that fit, each on its own grant channel.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ClusterServers.h"
#include "RedisClient.h"
#include "SemaphoreScenarios.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
namespace sem = dlock::test::sem;

namespace {

// `name` of capacity 3 over `backend`: three held, two threads wait for one each; a release of two
// admits both in the release itself; all back at the end.
void releaseAdmitsWaitingThreads(const std::shared_ptr<dlock::IOperator>& backend, const std::string& name) {
  auto semaphore = dlock::SemaphoreBuilder().backend(backend).name(name).permits(3).build();
  dlock::PermitLease two = semaphore->acquire(2);
  dlock::PermitLease one = semaphore->acquire(1);
  REQUIRE(two);
  REQUIRE(one);
  std::vector<dlock::PermitLease> got(2);
  std::vector<std::thread> waiters;
  for (std::size_t i = 0; i < 2; ++i) {
    waiters.emplace_back([&, i] {
      dlock::AcquireOptions wait;
      wait.waitTime = dlock::test::kEventBudget;
      got[i] = semaphore->acquire(1, wait);
    });
    REQUIRE(dlock::test::eventually([&] { return semaphore->inspect().waiters.size() == i + 1; }));
  }
  two.release();
  CHECK(semaphore->inspect().waiters.empty());
  CHECK(semaphore->availablePermits() == 0);
  for (auto& waiter : waiters) waiter.join();
  for (auto& each : got) {
    CHECK(each.fencingToken() > one.fencingToken());
    each.release();
  }
  one.release();
  CHECK(semaphore->availablePermits() == 3);
}

}  // namespace

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

  TEST_CASE("Sentinel: the Semaphore on the master admits the waiting threads a release frees, wait_replicas is refused") {
    dlock::test::SentinelServers set;
    releaseAdmitsWaitingThreads(dlock::connect(set.uri()), "sentinel-pool");
    CHECK_THROWS_WITH_AS(
        dlock::SemaphoreBuilder().backend(dlock::connect(set.uri("wait_replicas=1"))).name("s").permits(2).build(),
        doctest::Contains("wait_replicas"), dlock::ConfigError);
  }

  TEST_CASE("Cluster: the Semaphore admits the waiting threads a release frees, told over sharded pub/sub") {
    ClusterServers cluster;
    releaseAdmitsWaitingThreads(dlock::connect(cluster.uri()), "cluster-pool");
  }
}
