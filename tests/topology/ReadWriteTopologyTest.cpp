// SPDX-License-Identifier: Apache-2.0
// The read-write lock on a Redis Cluster: hand-offs over sharded pub/sub on every master, every
// script's keys in the name's slot, and the watchdog's batch renewal across slots; on Sentinel
// with wait_replicas, holds count once the replicas have them. And the lock class
// (ReadWriteLock) on Sentinel (with wait_replicas) and on every master of a Cluster.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ClusterServers.h"
#include "ReadWriteScenarios.h"
#include "RedisClient.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
namespace rw = dlock::test::rw;

namespace {

// Through `uri`: two readers share `name`; a writer waits for them; the curator#1138 sequence
// (write, read, release the write) lets no queued writer in before the read ends, and that
// writer gets a higher fencing token.
void checkReadWriteLock(const std::string& uri, const std::string& name) {
  CAPTURE(name);
  auto rwLock = dlock::LockBuilder().backend(dlock::connect(uri)).watchdogLease(3s).buildReadWrite();
  dlock::Lease r1 = rwLock->readLock()->acquire(name);
  dlock::Lease r2 = rwLock->readLock()->acquire(name);
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK_FALSE(rwLock->writeLock()->tryLock(name));
  r1.release();
  r2.release();

  REQUIRE(rwLock->writeLock()->tryLock(name));
  const std::uint64_t fence = rwLock->writeLock()->fencingToken(name);
  std::atomic<std::uint64_t> otherFence{0};
  std::thread other([&] {
    auto otherLock = dlock::LockBuilder().backend(dlock::connect(uri)).buildReadWrite();
    if (!otherLock->writeLock()->tryLock(name, 60s)) return;
    otherFence = otherLock->writeLock()->fencingToken(name);
    otherLock->writeLock()->unlock(name);
  });
  const bool queued =
      dlock::test::eventually([&] { return rwLock->inspect(name).waiters.size() == 1; }, dlock::test::kEventBudget);
  CHECK(queued);
  if (queued) {
    REQUIRE(rwLock->readLock()->tryLock(name));
    rwLock->writeLock()->unlock(name);  // the downgrade
    const dlock::ReadWriteInfo info = rwLock->inspect(name);
    CHECK_FALSE(info.writer);
    CHECK(info.readers.size() == 1);
    CHECK(otherFence.load() == 0);
    CHECK_NOTHROW(rwLock->readLock()->unlock(name));
  } else {
    rwLock->writeLock()->unlock(name);
  }
  other.join();
  CHECK(otherFence.load() > fence);
}

}  // namespace

TEST_SUITE("ReadWriteTopology") {
  TEST_CASE("Cluster: read-write hand-offs on every master over sharded pub/sub, a batch renewal across slots") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    REQUIRE(masters.size() == 3);
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(cluster.uri());
    auto& readWrite = dynamic_cast<dlock::IReadWriteOperator&>(*backend);
    std::vector<std::string> names;
    for (const std::size_t master : masters) {
      std::string name;
      for (int i = 0; name.empty(); ++i) {
        const std::string candidate = "rw-" + std::to_string(i);
        if (owners[dlock::clusterKeyNames("dlock:", candidate).slot] == master) name = candidate;
      }
      CAPTURE(name);
      names.push_back(name);
      rw::aReleaseAdmitsEveryReaderAtTheHead(readWrite, name);  // grants heard over SSUBSCRIBE
      RedisClient owner = cluster.client(master);
      CHECK(owner.ok({"EXISTS", "dlock:{" + name + "}:rw:fence"}).integer == 1);
      dlock::test::checkEveryLockKeyHasTtl(owner);
    }
    // One renewal batch over names served by three masters: one script per slot, each renewed.
    std::vector<dlock::ReadWriteLease> holds;
    for (const auto& name : names) {
      REQUIRE(readWrite.acquireRead(name, rw::kR1, 10s, 5s).acquired);
      holds.push_back({name, rw::kR1, dlock::ReadWriteMode::Read});
    }
    holds.push_back({names.front(), rw::kR2, dlock::ReadWriteMode::Read});  // not a reader there
    const std::vector<dlock::ExtendResult> renewed = readWrite.extendReadWriteAll(holds, 60s);
    REQUIRE(renewed.size() == 4);
    for (std::size_t i = 0; i < 3; ++i) CHECK(renewed[i].extended);
    CHECK_FALSE(renewed[3].extended);
    for (const auto& name : names) CHECK(readWrite.inspectReadWrite(name).readers.at(0).remaining > 10s);
    // A name starting with '}' gets the cluster's hashed names: every script still runs in one slot.
    rw::aDowngradeKeepsItsPlace(readWrite, "}odd{", true);
  }

  TEST_CASE("Sentinel with wait_replicas: holds count once the replicas have them, and with replication cut an acquire, an upgrade or a hand-off is undone") {
    dlock::test::SentinelServers set;
    auto acked = dlock::connect(set.uri("wait_replicas=2&wait_timeout=300ms"));
    auto plain = dlock::connect(set.uri());
    auto& readWrite = dynamic_cast<dlock::IReadWriteOperator&>(*acked);
    auto& unchecked = dynamic_cast<dlock::IReadWriteOperator&>(*plain);
    CHECK(readWrite.readWriteUnsupported().empty());
    // Replicas up: the write, and a hand-off confirmed by its grantee's extend, are on the replicas.
    REQUIRE(readWrite.acquireWrite("up", rw::kW1, 60s, 0ms).acquired);
    CHECK(set.dataClient(1).ok({"GET", "dlock:{up}:rw:writer"}).str == rw::kW1);
    REQUIRE(readWrite.acquireRead("up", rw::kR1, 60s, 30s).position == 1);
    REQUIRE(unchecked.releaseWrite("up", rw::kW1).notified == 1);
    CHECK(readWrite.extendReadWrite({"up", rw::kR1, dlock::ReadWriteMode::Read}, 60s));
    CHECK(set.dataClient(2).ok({"ZSCORE", "dlock:{up}:rw:readers", rw::kR1}).type == REDIS_REPLY_STRING);
    REQUIRE(unchecked.acquireWrite("handed", rw::kW1, 60s, 0ms).acquired);
    REQUIRE(unchecked.acquireRead("handed", rw::kR1, 60s, 30s).position == 1);
    REQUIRE(unchecked.acquireRead("upgrade", rw::kR1, 60s, 0ms).acquired);
    REQUIRE(unchecked.acquireRead("renew", rw::kR1, 60s, 0ms).acquired);

    // Replication stops (replicas frozen, their links cut so nothing more reaches their sockets).
    set.pauseData(1);
    set.pauseData(2);
    CHECK(set.dataClient(0).ok({"CLIENT", "KILL", "TYPE", "replica"}).integer == 2);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS((void)readWrite.acquireWrite("cut", rw::kW1, 60s, 0ms),
                         doctest::Contains("only 0 of 2 replicas acknowledged the lock within 300 ms; released it"),
                         dlock::ConnectionError);
    CHECK(std::chrono::steady_clock::now() - start < 300ms + 5s);  // the WAIT timeout, with room for a busy machine
    CHECK_FALSE(unchecked.inspectReadWrite("cut").writer.has_value());
    CHECK_THROWS_AS((void)readWrite.acquireRead("cut", rw::kR1, 60s, 0ms), dlock::ConnectionError);
    CHECK(unchecked.inspectReadWrite("cut").readers.empty());
    // An upgrade is given back: the sole reader reads again.
    CHECK_THROWS_WITH_AS((void)readWrite.tryUpgrade("upgrade", rw::kR1, 60s),
                         doctest::Contains("downgraded it back to its read hold"), dlock::ConnectionError);
    const dlock::ReadWriteInfo upgrade = unchecked.inspectReadWrite("upgrade");
    CHECK_FALSE(upgrade.writer.has_value());
    REQUIRE(upgrade.readers.size() == 1);
    CHECK(upgrade.readers[0].token == rw::kR1);
    // A hand-off meanwhile: its confirming extend is not counted, and the try that finds it ours
    // gives it back.
    REQUIRE(unchecked.releaseWrite("handed", rw::kW1).notified == 1);
    CHECK_THROWS_WITH_AS((void)readWrite.extendReadWrite({"handed", rw::kR1, dlock::ReadWriteMode::Read}, 60s),
                         doctest::Contains("too few replicas"), dlock::ConnectionError);
    CHECK_THROWS_WITH_AS((void)readWrite.acquireRead("handed", rw::kR1, 60s, 30s), doctest::Contains("released it"),
                         dlock::ConnectionError);
    CHECK(unchecked.inspectReadWrite("handed").readers.empty());
    // A renewal batch no replica acknowledges is unknown, not extended.
    const std::vector<dlock::ExtendResult> renewed =
        readWrite.extendReadWriteAll({{"renew", rw::kR1, dlock::ReadWriteMode::Read}}, 60s);
    REQUIRE(renewed.size() == 1);
    CHECK(renewed[0].unknown);
    CHECK_FALSE(renewed[0].extended);
    set.resumeData(1);
    set.resumeData(2);
  }

  TEST_CASE("Sentinel: the read-write lock shares, excludes and downgrades on the master, with wait_replicas") {
    dlock::test::SentinelServers set;
    checkReadWriteLock(set.uri("wait_replicas=2&wait_timeout=2s"), "rw-sentinel");
    auto master = set.dataClient(set.nodeOfPort(set.masterPort()));
    CHECK(master.ok({"EXISTS", "dlock:{rw-sentinel}:rw:fence"}).integer == 1);
    dlock::test::checkEveryLockKeyHasTtl(master);
  }

  TEST_CASE("Cluster: the read-write lock shares, excludes and downgrades on a name of every master") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    for (const std::size_t master : cluster.masters()) {
      std::string name;
      for (int i = 0; name.empty(); ++i) {
        const std::string candidate = "rw-lock-" + std::to_string(i);
        if (owners[dlock::clusterKeyNames("dlock:", candidate).slot] == master) name = candidate;
      }
      checkReadWriteLock(cluster.uri(), name);
      RedisClient owner = cluster.client(master);
      dlock::test::checkEveryLockKeyHasTtl(owner);
    }
  }
}
