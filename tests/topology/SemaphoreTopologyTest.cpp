// SPDX-License-Identifier: Apache-2.0
// The semaphore on a Redis Cluster: every key of one semaphore in its name's slot, admissions
// told over sharded pub/sub, a renewal batch one script per slot; and the Semaphore
// (SemaphoreBuilder) on Sentinel and Cluster: a release admits the waiting threads that fit, each
// on its own grant channel; on Sentinel with wait_replicas, what the replicas do not acknowledge
// is not held.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
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

  TEST_CASE("Sentinel: the Semaphore on the master admits the waiting threads a release frees, with wait_replicas too") {
    dlock::test::SentinelServers set;
    releaseAdmitsWaitingThreads(dlock::connect(set.uri()), "sentinel-pool");
    releaseAdmitsWaitingThreads(dlock::connect(set.uri("wait_replicas=2&wait_timeout=5s")), "acked-pool");
  }

  TEST_CASE("Sentinel with wait_replicas: permits count once the replicas have them, and with replication cut an acquire or a grant is undone") {
    dlock::test::SentinelServers set;
    auto acked = dlock::connect(set.uri("wait_replicas=2&wait_timeout=300ms"));
    auto plain = dlock::connect(set.uri());
    auto& semaphore = dynamic_cast<dlock::ISemaphoreOperator&>(*acked);
    auto& unchecked = dynamic_cast<dlock::ISemaphoreOperator&>(*plain);
    const auto replicaState = [&](std::size_t node, const std::string& name, const std::string& token) {
      return set.dataClient(node).ok({"HGET", "dlock:{" + name + "}:sem:state", token}).str;
    };
    // Replicas up: a grant's confirming extend returns once both replicas have the grant.
    REQUIRE(semaphore.acquirePermits("up", sem::kA, 1, 1, 60s, 0ms).acquired);
    CHECK(replicaState(1, "up", sem::kA).rfind("h|", 0) == 0);
    REQUIRE(semaphore.acquirePermits("up", sem::kB, 1, 1, 60s, 30s).position == 1);
    REQUIRE(unchecked.releasePermits("up", sem::kA).notified == 1);
    CHECK(semaphore.extendPermits("up", sem::kB, 60s));
    CHECK(replicaState(2, "up", sem::kB).rfind("h|", 0) == 0);
    REQUIRE(unchecked.acquirePermits("grant", sem::kA, 1, 1, 60s, 0ms).acquired);
    REQUIRE(unchecked.acquirePermits("grant", sem::kB, 1, 1, 60s, 30s).position == 1);
    REQUIRE(unchecked.acquirePermits("renew", sem::kA, 1, 1, 60s, 0ms).acquired);

    // Replication stops (replicas frozen, their links cut so nothing more reaches their sockets).
    set.pauseData(1);
    set.pauseData(2);
    CHECK(set.dataClient(0).ok({"CLIENT", "KILL", "TYPE", "replica"}).integer == 2);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS((void)semaphore.acquirePermits("cut", sem::kA, 1, 1, 60s, 0ms),
                         doctest::Contains("only 0 of 2 replicas acknowledged the lock within 300 ms; released it"),
                         dlock::ConnectionError);
    CHECK(std::chrono::steady_clock::now() - start < 300ms + 5s);  // the WAIT timeout, with room for a busy machine
    CHECK(unchecked.inspectSemaphore("cut").inUse == 0);
    // A grant handed over meanwhile: its confirming extend is not counted, and the try that finds
    // it ours gives it back.
    REQUIRE(unchecked.releasePermits("grant", sem::kA).notified == 1);
    CHECK_THROWS_WITH_AS((void)semaphore.extendPermits("grant", sem::kB, 60s), doctest::Contains("too few replicas"),
                         dlock::ConnectionError);
    CHECK_THROWS_WITH_AS((void)semaphore.acquirePermits("grant", sem::kB, 1, 1, 60s, 30s),
                         doctest::Contains("released it"), dlock::ConnectionError);
    CHECK(unchecked.inspectSemaphore("grant").inUse == 0);
    // A renewal batch no replica acknowledges is unknown, not extended.
    const std::vector<dlock::ExtendResult> renewed = semaphore.extendPermitsAll({{"renew", sem::kA}}, 60s);
    REQUIRE(renewed.size() == 1);
    CHECK(renewed[0].unknown);
    CHECK_FALSE(renewed[0].extended);
    // Through the Semaphore: nothing is held when its wait ends (the last WAIT is acknowledged by
    // too few, or cut off by the wait's end; either way the try is given up).
    auto built = dlock::SemaphoreBuilder().backend(acked).name("built").permits(2).build();
    dlock::AcquireOptions wait;
    wait.waitTime = 1s;
    wait.leaseTime = 10min;  // so only the attempt's own leave can return the permit in time
    CHECK_THROWS_AS((void)built->acquire(1, wait), dlock::ConnectionError);
    CHECK(dlock::test::eventually([&] { return built->availablePermits() == 2; }));  // left, maybe on the cleanup lane
    set.resumeData(1);
    set.resumeData(2);
  }

  TEST_CASE("Sentinel with wait_replicas: a grant found by a try on a fresh connection is waited for too") {
    // WAIT is documented to count the connection's own writes, and a fresh connection has none:
    // the replicas, connected but frozen, could seem to have the grant at once. (Redis 7.0 counts
    // up to any command's offset, reads too, so there the acquire alone already covers it.)
    dlock::test::SentinelServers set;
    // Its release record lives a minute (command timeout + retry budget): the try below finds
    // nothing due, so it writes nothing itself.
    auto plain = dlock::connect(set.uri("command_timeout=60s"));
    auto& unchecked = dynamic_cast<dlock::ISemaphoreOperator&>(*plain);
    REQUIRE(unchecked.acquirePermits("found", sem::kA, 1, 1, 60s, 0ms).acquired);
    REQUIRE(unchecked.acquirePermits("found", sem::kB, 1, 1, 60s, 30s).position == 1);
    set.pauseData(1);
    set.pauseData(2);
    REQUIRE(unchecked.releasePermits("found", sem::kA).notified == 1);  // granted to kB
    auto fresh = dlock::connect(set.uri("wait_replicas=2&wait_timeout=300ms"));
    CHECK_THROWS_WITH_AS((void)dynamic_cast<dlock::ISemaphoreOperator&>(*fresh).acquirePermits("found", sem::kB, 1, 1,
                                                                                               60s, 30s),
                         doctest::Contains("only 0 of 2 replicas acknowledged the lock within 300 ms; released it"),
                         dlock::ConnectionError);
    CHECK(unchecked.inspectSemaphore("found").inUse == 0);
    set.resumeData(1);
    set.resumeData(2);
  }

  TEST_CASE("Cluster: a renewal batch over names in different slots is one script call per slot") {
    ClusterServers cluster;
    auto backend = dlock::connect(cluster.uri());
    auto& semaphore = dynamic_cast<dlock::ISemaphoreOperator&>(*backend);
    const auto owners = cluster.slotOwners();
    // Two names on each master, each name its own slot; two leases per name.
    std::vector<std::string> names;
    std::map<std::size_t, std::size_t> slotsOn;  // master → slots among the names
    for (int i = 0; names.size() < 6; ++i) {
      const std::string name = "batch-" + std::to_string(i);
      const std::size_t master = owners[dlock::clusterKeyNames("dlock:", name).slot];
      if (slotsOn[master] == 2) continue;
      ++slotsOn[master];
      names.push_back(name);
    }
    std::vector<dlock::LeaseRef> leases;
    for (const std::string& name : names) {
      for (const std::string* token : {&sem::kA, &sem::kB}) {
        REQUIRE(semaphore.acquirePermits(name, *token, 1, 2, 10s, 0ms).acquired);
        leases.push_back({name, *token});
      }
    }
    REQUIRE(semaphore.releasePermits(names.front(), sem::kB).released);
    (void)semaphore.extendPermitsAll(leases, 60s);  // scripts loaded on every master
    for (const std::size_t master : cluster.masters()) (void)cluster.client(master).ok({"CONFIG", "RESETSTAT"});
    const std::vector<dlock::ExtendResult> renewed = semaphore.extendPermitsAll(leases, 60s);
    REQUIRE(renewed.size() == leases.size());
    for (std::size_t i = 0; i < leases.size(); ++i) {
      CAPTURE(i);
      CHECK_FALSE(renewed[i].unknown);
      CHECK(renewed[i].extended == (i != 1));
    }
    for (const std::size_t master : cluster.masters()) {
      CAPTURE(master);
      const auto calls = cluster.client(master).commandCalls();
      const long long scripts = (calls.count("evalsha") != 0 ? calls.at("evalsha") : 0) +
                                (calls.count("eval") != 0 ? calls.at("eval") : 0);
      CHECK(scripts == static_cast<long long>(slotsOn[master]));
    }
  }

  TEST_CASE("Cluster: the Semaphore admits the waiting threads a release frees, told over sharded pub/sub") {
    ClusterServers cluster;
    releaseAdmitsWaitingThreads(dlock::connect(cluster.uri()), "cluster-pool");
  }
}
