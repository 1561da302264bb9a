// SPDX-License-Identifier: Apache-2.0
// The read-write lock on a Redis Cluster: hand-offs over sharded pub/sub on every master, every
// script's keys in the name's slot, and the watchdog's batch renewal across slots. And the lock
// class (ReadWriteLock) on Sentinel (wait_replicas) and on every master of a Cluster.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <atomic>
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

  TEST_CASE("Sentinel: the read-write lock shares, excludes and downgrades on the master, wait_replicas is refused") {
    dlock::test::SentinelServers set;
    // The backend's read-write scripts are not acknowledged by replicas: a ConfigError at build.
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(dlock::connect(set.uri("wait_replicas=1"))).buildReadWrite(),
                    dlock::ConfigError);
    checkReadWriteLock(set.uri(), "rw-sentinel");
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
