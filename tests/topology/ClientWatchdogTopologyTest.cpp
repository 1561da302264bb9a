// SPDX-License-Identifier: Apache-2.0
// One watchdog behind a dlock::Client over a Redis Cluster: the holds of every kind, spread over
// the masters, renewed at each tick in one pipeline per master that serves any of them; a master
// paused in the middle of the rounds costs only its own holds; over Sentinel, the rounds follow a
// failover to the promoted master.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "ClusterServers.h"
#include "RedisClient.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/Client.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
using dlock::test::SentinelServers;

namespace {

// A node's read events (total_reads_processed), from one INFO whose own read is counted in it.
long long readsOf(RedisClient& node) {
  const std::string info = node.ok({"INFO", "stats"}).str;
  const std::string field = "total_reads_processed:";
  const auto at = info.find(field);
  REQUIRE(at != std::string::npos);
  return std::stoll(info.substr(at + field.size()));
}

// A client's holds of every kind at once: a lock on "a", a fair lock on "c", a write on "d" and a
// read on "e" of one read-write lock, and two permits of a semaphore of 3.
struct EveryKind {
  explicit EveryKind(dlock::Client& client)
      : lock(client.getLock("orders")), fair(client.getFairLock("queue")), config(client.getReadWriteLock("config")),
        partner(client.getSemaphore("partner-api", 3)) {
    REQUIRE(lock->tryLock("a"));
    REQUIRE(fair->tryLock("c"));
    REQUIRE(config->writeLock()->tryLock("d"));
    REQUIRE(config->readLock()->tryLock("e"));
    permits = partner->tryAcquire(2);
    REQUIRE(permits);
  }
  std::shared_ptr<dlock::ILock> lock;
  std::shared_ptr<dlock::ILock> fair;
  std::shared_ptr<dlock::ReadWriteLock> config;
  std::shared_ptr<dlock::Semaphore> partner;
  dlock::PermitLease permits;
};

}  // namespace

TEST_SUITE("ClientWatchdogTopology") {
  TEST_CASE("Cluster: a client's holds of every kind are renewed in one pipeline per master that serves them") {
    ClusterServers::Options options;
    options.replicasPerMaster = 0;
    ClusterServers cluster(options);
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::Client client(cluster.uri(), dlock::ClientOptions{{}, clock, nullptr});
    EveryKind held(client);
    REQUIRE(held.lock->tryLock("b"));
    std::map<std::size_t, int> serving;  // master index: holds it serves
    for (const std::string key : {"a", "b", "c", "d", "e", "partner-api"}) {
      ++serving[cluster.ownerOf(dlock::clusterKeyNames("dlock:", key).slot)];
    }
    REQUIRE(serving.size() >= 2);  // spread over masters, or the test shows nothing of them
    const std::vector<std::size_t> masters = cluster.masters();
    clock->advance(10s);  // the first round loads the scripts on each master
    std::map<std::size_t, long long> before;
    std::vector<RedisClient> nodes;
    for (const std::size_t m : masters) nodes.push_back(cluster.client(m));
    for (std::size_t i = 0; i < masters.size(); ++i) before[masters[i]] = readsOf(nodes[i]);
    clock->advance(10s);
    for (std::size_t i = 0; i < masters.size(); ++i) {
      CAPTURE(masters[i]);
      // One read event for the round's pipeline on a master that serves holds, none elsewhere;
      // and one for the INFO that counted it.
      CHECK(readsOf(nodes[i]) - before[masters[i]] == (serving.count(masters[i]) > 0 ? 2 : 1));
    }
    CHECK(held.lock->stats().renewals == 4);
    CHECK(held.fair->stats().renewals == 2);
    CHECK(held.config->readLock()->stats().renewals == 4);
    CHECK(held.partner->stats().renewals == 2);
    clock->advance(25s);
    CHECK(held.lock->isHeld("a"));
    CHECK(held.config->readLock()->isHeld("e"));
    CHECK(held.permits.isHeld());
    held.permits = dlock::PermitLease();
    client.close();
  }

  TEST_CASE("Cluster: a master paused under the client's holds loses only its own, and the others stay renewed on time") {
    ClusterServers::Options options;
    options.replicasPerMaster = 0;
    options.nodeTimeout = 30s;  // the paused master stays a member: no failover, no failed cluster
    options.config = {"cluster-require-full-coverage no"};
    ClusterServers cluster(options);
    dlock::ClientOptions clientOptions;
    clientOptions.lock.watchdogLease = 3s;  // renewed every second of real time
    dlock::Client client(cluster.uri(), clientOptions);
    // One lock per master, each holding a key that master serves.
    const std::vector<std::size_t> masters = cluster.masters();
    REQUIRE(masters.size() == 3);
    std::map<std::size_t, std::string> keyOf;
    for (int i = 0; keyOf.size() < masters.size(); ++i) {
      const std::string key = "k" + std::to_string(i);
      keyOf.emplace(cluster.ownerOf(dlock::clusterKeyNames("dlock:", key).slot), key);
    }
    std::mutex mutex;
    std::set<std::string> lost;
    std::map<std::size_t, std::shared_ptr<dlock::ILock>> locks;
    for (const auto& [master, key] : keyOf) {
      locks[master] = client.getLock("on-" + key);
      locks[master]->onLockLost([&](std::string_view lostKey, std::uint64_t) {
        const std::lock_guard<std::mutex> guard(mutex);
        lost.emplace(lostKey);
      });
      REQUIRE(locks[master]->tryLock(key));
    }
    for (const auto& entry : locks) {
      const auto& lock = entry.second;
      REQUIRE(dlock::test::eventually([&] { return lock->stats().renewals >= 1; }, 10s));
    }
    const std::size_t paused = masters.front();
    std::map<std::size_t, std::uint64_t> renewedBefore;
    for (const auto& [master, lock] : locks) renewedBefore[master] = lock->stats().renewals;
    cluster.node(paused).pause();
    // The paused master's hold is reported lost at its local deadline; meanwhile the others are
    // renewed each second, not held up behind the paused master's replies.
    CHECK(dlock::test::eventually([&] { return !locks[paused]->isHeld(keyOf[paused]); }, 10s));
    for (const auto& entry : locks) {
      const std::size_t master = entry.first;
      const auto& lock = entry.second;
      if (master == paused) continue;
      CAPTURE(master);
      CHECK(dlock::test::eventually([&] { return lock->stats().renewals >= renewedBefore[master] + 3; }, 10s));
      CHECK(lock->isHeld(keyOf[master]));
    }
    cluster.node(paused).resume();
    {
      const std::lock_guard<std::mutex> guard(mutex);
      CHECK(lost == std::set<std::string>{keyOf[paused]});
    }
    CHECK_THROWS_AS(locks[paused]->unlock(keyOf[paused]), dlock::LockLostError);
    for (const auto& [master, lock] : locks) {
      if (master == paused) continue;
      RedisClient node = cluster.client(master);
      CHECK(node.ok({"EXISTS", dlock::clusterKeyNames("dlock:", keyOf[master]).lock}).integer == 1);
      lock->unlock(keyOf[master]);
    }
    client.close();
  }

  TEST_CASE("Sentinel: a client's holds of every kind stay renewed through a failover, on the promoted master") {
    SentinelServers set;
    dlock::ClientOptions options;
    options.lock.watchdogLease = 1500ms;  // renewed every 500 ms of real time
    dlock::Client client(set.uri(), options);
    EveryKind held(client);
    const auto renewedPast = [&](std::uint64_t lockCount, std::uint64_t permitCount) {
      return dlock::test::eventually([&] {
        return held.lock->stats().renewals >= lockCount && held.fair->stats().renewals >= lockCount &&
               held.config->readLock()->stats().renewals >= 2 * lockCount && held.partner->stats().renewals >= permitCount;
      }, 30s);
    };
    REQUIRE(renewedPast(2, 2));
    const int oldMaster = set.masterPort();
    set.failover();
    const int newMaster = set.waitForMasterOtherThan(oldMaster, 30s);
    // Four more rounds each after the promotion was seen: more than a lease, so only renewals on
    // the promoted master can have kept them.
    const auto lockRounds = held.lock->stats().renewals;
    const auto permitRounds = held.partner->stats().renewals;
    CHECK(renewedPast(lockRounds + 4, permitRounds + 4));
    CHECK(held.lock->isHeld("a"));
    CHECK(held.fair->isHeld("c"));
    CHECK(held.config->writeLock()->isHeld("d"));
    CHECK(held.config->readLock()->isHeld("e"));
    CHECK(held.permits.isHeld());
    RedisClient promoted = set.dataClient(set.nodeOfPort(newMaster));
    for (const std::string key : {"dlock:{a}", "dlock:{c}"}) {
      CAPTURE(key);
      CHECK(promoted.ok({"PTTL", key}).integer > 0);
    }
    CHECK(held.lock->stats().lostLeases == 0);
    CHECK(held.fair->stats().lostLeases == 0);
    CHECK(held.config->readLock()->stats().lostLeases == 0);
    CHECK(held.partner->stats().lostLeases == 0);
    held.permits = dlock::PermitLease();
    client.close();
    CHECK(promoted.ok({"EXISTS", "dlock:{a}"}).integer == 0);
  }
}
