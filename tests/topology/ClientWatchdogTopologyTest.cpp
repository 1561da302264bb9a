// SPDX-License-Identifier: Apache-2.0
// One watchdog behind a dlock::Client over a Redis Cluster: the holds of every kind, spread over
// the masters, renewed at each tick in one pipeline per master that serves any of them.
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ClusterServers.h"
#include "RedisClient.h"
#include "dlock/Client.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;

namespace {

// A node's read events (total_reads_processed), from one INFO whose own read is counted in it.
long long readsOf(RedisClient& node) {
  const std::string info = node.ok({"INFO", "stats"}).str;
  const std::string field = "total_reads_processed:";
  const auto at = info.find(field);
  REQUIRE(at != std::string::npos);
  return std::stoll(info.substr(at + field.size()));
}

}  // namespace

TEST_SUITE("ClientWatchdogTopology") {
  TEST_CASE("Cluster: a client's holds of every kind are renewed in one pipeline per master that serves them") {
    ClusterServers::Options options;
    options.replicasPerMaster = 0;
    ClusterServers cluster(options);
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::Client client(cluster.uri(), dlock::ClientOptions{{}, clock, nullptr});
    const auto lock = client.getLock("orders");
    const auto fair = client.getFairLock("queue");
    const auto config = client.getReadWriteLock("config");
    const auto partner = client.getSemaphore("partner-api", 3);
    REQUIRE(lock->tryLock("a"));
    REQUIRE(lock->tryLock("b"));
    REQUIRE(fair->tryLock("c"));
    REQUIRE(config->writeLock()->tryLock("d"));
    REQUIRE(config->readLock()->tryLock("e"));
    dlock::PermitLease permits = partner->tryAcquire(2);
    REQUIRE(permits);
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
    CHECK(lock->stats().renewals == 4);
    CHECK(fair->stats().renewals == 2);
    CHECK(config->readLock()->stats().renewals == 4);
    CHECK(partner->stats().renewals == 2);
    clock->advance(25s);
    CHECK(lock->isHeld("a"));
    CHECK(config->readLock()->isHeld("e"));
    CHECK(permits.isHeld());
    permits = dlock::PermitLease();
    client.close();
  }
}
