// SPDX-License-Identifier: Apache-2.0
// The fair lock on Sentinel and Cluster: FIFO hand-off with each waiter on its own connection,
// through a failover (Sentinel) and on every master with sharded pub/sub (Cluster); with
// wait_replicas (Sentinel), a hold counts once the replicas have it.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ClusterServers.h"
#include "RedisClient.h"
#include "PausedHeir.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/IFairOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
using dlock::test::SentinelServers;
using dlock::test::eventually;

namespace {

std::shared_ptr<dlock::ILock> fairLockOn(const std::string& uri) {
  return dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(30s).fair().build();
}

// `count` waiters, each with its own lock and connections, queue for `key` one after the other
// (`queued()` tells how many the server has) while a holder has it; they must get it in that order.
void checkFifo(const std::string& uri, const std::string& key, int count, const std::function<long long()>& queued) {
  auto holder = fairLockOn(uri);
  holder->lock(key);
  std::vector<std::shared_ptr<dlock::ILock>> locks;
  for (int i = 0; i < count; ++i) locks.push_back(fairLockOn(uri));
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::uint64_t> fences{holder->fencingToken(key)};
  std::vector<std::thread> waiters;
  for (int i = 0; i < count; ++i) {
    waiters.emplace_back([&, i] {
      auto& lock = *locks[static_cast<std::size_t>(i)];
      if (!lock.tryLock(key, 60s)) return;
      {
        std::lock_guard<std::mutex> guard(mutex);
        order.push_back(i);
        fences.push_back(lock.fencingToken(key));
      }
      lock.unlock(key);
    });
    REQUIRE(eventually([&] { return queued() == i + 1; }));
  }
  holder->unlock(key);
  for (auto& waiter : waiters) waiter.join();
  std::vector<int> expected;
  for (int i = 0; i < count; ++i) expected.push_back(i);
  CHECK(order == expected);
  for (std::size_t i = 1; i < fences.size(); ++i) CHECK(fences[i] > fences[i - 1]);
}

}  // namespace

TEST_SUITE("FairLockTopology") {
  TEST_CASE("Sentinel: FIFO hand-off on the master, and again on the promoted replica after a failover") {
    SentinelServers set;
    const auto queueOnMaster = [&](const std::string& key) {
      return [&set, key] {
        auto master = set.dataClient(set.nodeOfPort(set.masterPort()));
        return master.ok({"LLEN", "dlock:{" + key + "}:fair:queue"}).integer;
      };
    };
    checkFifo(set.uri(), "before", 4, queueOnMaster("before"));
    const int oldMaster = set.masterPort();
    set.failover();
    const int newMaster = set.waitForMasterOtherThan(oldMaster, 30s);
    set.waitForAllSentinelsToName(newMaster, 10s);
    checkFifo(set.uri(), "after", 4, queueOnMaster("after"));
    auto master = set.dataClient(set.nodeOfPort(newMaster));
    CHECK(master.ok({"EXISTS", "dlock:{after}:fence"}).integer == 1);  // handed over there
    dlock::test::checkEveryLockKeyHasTtl(master);
  }

  TEST_CASE("Sentinel with wait_replicas: FIFO hand-off, and with replication cut an acquire or a hand-off is undone") {
    SentinelServers set;
    checkFifo(set.uri("wait_replicas=2&wait_timeout=5s"), "acked", 3, [&set] {
      return set.dataClient(0).ok({"LLEN", "dlock:{acked}:fair:queue"}).integer;
    });
    auto acked = dlock::connect(set.uri("wait_replicas=2&wait_timeout=300ms"));
    auto plain = dlock::connect(set.uri());
    auto& queue = dynamic_cast<dlock::IFairOperator&>(*acked);
    auto& unchecked = dynamic_cast<dlock::IFairOperator&>(*plain);
    const std::string a(32, 'a'), b(32, 'b');
    REQUIRE(unchecked.fairLock("handed", a, 60s, 0ms).acquired);
    REQUIRE(queue.fairLock("handed", b, 60s, 30s).position == 1);  // queued: nothing to acknowledge

    // Replication stops (replicas frozen, their links cut so nothing more reaches their sockets).
    set.pauseData(1);
    set.pauseData(2);
    auto master = set.dataClient(0);
    CHECK(master.ok({"CLIENT", "KILL", "TYPE", "replica"}).integer == 2);
    CHECK_THROWS_WITH_AS((void)queue.fairLock("cut", a, 60s, 0ms),
                         doctest::Contains("only 0 of 2 replicas acknowledged the lock within 300 ms; released it"),
                         dlock::ConnectionError);
    CHECK(master.ok({"EXISTS", "dlock:{cut}"}).integer == 0);
    // A hand-off meanwhile: its grantee's confirming extend is not counted, and the try that finds
    // the key ours gives it back.
    REQUIRE(unchecked.fairUnlock("handed", a).notified == 1);
    CHECK_THROWS_WITH_AS((void)acked->extend("handed", b, 60s), doctest::Contains("too few replicas"),
                         dlock::ConnectionError);
    CHECK_THROWS_WITH_AS((void)queue.fairLock("handed", b, 60s, 30s), doctest::Contains("released it"),
                         dlock::ConnectionError);
    CHECK(master.ok({"EXISTS", "dlock:{handed}"}).integer == 0);
    // Through the lock: nothing is held when its wait ends.
    auto lock = dlock::LockBuilder().backend(acked).leaseTime(10min).fair().build();
    CHECK_THROWS_AS((void)lock->tryLock("lock", 1s), dlock::ConnectionError);
    CHECK(lock->holdCount("lock") == 0);
    CHECK(eventually([&] { return master.ok({"EXISTS", "dlock:{lock}"}).integer == 0; }));  // left, maybe on the cleanup lane
    set.resumeData(1);
    set.resumeData(2);
  }

  TEST_CASE("Cluster: FIFO hand-off on every master over sharded pub/sub, all keys in the lock's slot") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    REQUIRE(masters.size() == 3);
    for (const std::size_t master : masters) {
      std::string key;
      for (int i = 0; key.empty(); ++i) {
        const std::string candidate = "fair-" + std::to_string(i);
        if (owners[dlock::clusterKeyNames("dlock:", candidate).slot] == master) key = candidate;
      }
      CAPTURE(key);
      RedisClient owner = cluster.client(master);
      checkFifo(cluster.uri(), key, 3, [&] { return owner.ok({"LLEN", "dlock:{" + key + "}:fair:queue"}).integer; });
      dlock::test::checkEveryLockKeyHasTtl(owner);
    }
    // A key starting with '}' gets the cluster's hashed names: the queue shares the lock's slot.
    auto node = dlock::connect(cluster.uri());
    auto lock = dlock::LockBuilder().backend(node).leaseTime(30s).fair().build();
    auto other = dlock::LockBuilder().backend(dlock::connect(cluster.uri())).leaseTime(30s).fair().build();
    lock->lock("}odd{");
    CHECK_FALSE(other->tryLock("}odd{", 50ms));  // queued and left: every script ran in one slot
    lock->unlock("}odd{");
    CHECK(other->tryLock("}odd{", 0ms));
    other->unlock("}odd{");
  }

  TEST_CASE("Sentinel and Cluster: a waiter paused past its hand-off's claim does not return while another holds the key") {
    {
      SentinelServers set;
      auto master = set.dataClient(set.nodeOfPort(set.masterPort()));
      dlock::test::checkPausedHeirWaitsItsTurn(DLOCK_TEST_WORKER, set.uri(), "paused", master);
    }
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    RedisClient owner = cluster.client(owners[dlock::clusterKeyNames("dlock:", "paused").slot]);
    dlock::test::checkPausedHeirWaitsItsTurn(DLOCK_TEST_WORKER, cluster.uri(), "paused", owner);
  }
}
