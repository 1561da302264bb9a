// SPDX-License-Identifier: Apache-2.0
// The read-write lock on a Redis Cluster: hand-offs over sharded pub/sub on every master, every
// script's keys in the name's slot, and the watchdog's batch renewal across slots.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ClusterServers.h"
#include "ReadWriteScenarios.h"
#include "RedisClient.h"
#include "TestHelpers.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
namespace rw = dlock::test::rw;

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
}
