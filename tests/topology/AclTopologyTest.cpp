// SPDX-License-Identifier: Apache-2.0
// The README's least-privilege ACL lines for a Sentinel set's data nodes and a cluster's nodes: a
// user granted exactly the line passes connect() and runs every primitive; without the line's own
// pub/sub rule connect() fails naming it (the shared rules are each checked on one server, AclTest).
// The sentinels' own line: the master's address and every failover event's channel.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ClusterServers.h"
#include "LogCapture.h"
#include "ReadmeAcl.h"
#include "RedisClient.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"

using dlock::test::ClusterServers;
using dlock::test::eventually;
using dlock::test::RedisClient;
using dlock::test::SentinelServers;

namespace {

// Whether sentinel `i` shows a connection of the ACL user `locks` subscribed to all `channels`.
bool subscribedAsLocks(SentinelServers& set, std::size_t i, int channels) {
  const std::string clients = set.sentinelClient(i).ok({"CLIENT", "LIST"}).str;
  return clients.find("sub=" + std::to_string(channels) + " ") != std::string::npos &&
         clients.find("user=locks ") != std::string::npos;
}

}  // namespace

TEST_SUITE("AclTopology") {
  TEST_CASE("Sentinel: the README's ACL line for the sentinels lets dlock resolve the master and hear failovers") {
    SentinelServers set;
    const std::vector<std::string> dataLine = dlock::test::readmeAclLine("sentinel");
    for (std::size_t i = 0; i < 3; ++i) set.dataClient(i).ok(dataLine);
    const std::vector<std::string> line = dlock::test::readmeAclLine("sentinels");
    constexpr int kEventChannels = 7;
    for (std::size_t i = 0; i < 3; ++i) set.sentinelClient(i).ok(line);
    const std::string uri = dlock::test::withAclUser(set.uri("sentinel_user=locks&sentinel_password=secret"));
    {
      dlock::test::LogCapture log(spdlog::level::warn);
      const auto backend = dlock::connect(uri);
      dlock::test::useEveryPrimitive(backend);
      for (std::size_t i = 0; i < 3; ++i) CHECK(eventually([&] { return subscribedAsLocks(set, i, kEventChannels); }));
      CHECK(log.text().find("refused") == std::string::npos);
    }
    // Without one event's channel, the subscriber says so, naming the refusal.
    for (std::size_t i = 0; i < 3; ++i) set.sentinelClient(i).ok(dlock::test::withoutRule(line, "&+switch-master"));
    dlock::test::LogCapture log(spdlog::level::warn);
    const auto backend = dlock::connect(uri);
    CHECK(eventually([&] { return log.text().find("SUBSCRIBE +switch-master refused") != std::string::npos; }));
  }

  TEST_CASE("Sentinel: the README's ACL line for the data nodes grants every primitive") {
    SentinelServers set;
    const std::vector<std::string> line = dlock::test::readmeAclLine("sentinel");
    for (std::size_t i = 0; i < 3; ++i) set.dataClient(i).ok(line);
    const std::string uri = dlock::test::withAclUser(set.uri());
    dlock::test::useEveryPrimitive(dlock::connect(uri));

    for (std::size_t i = 0; i < 3; ++i) set.dataClient(i).ok(dlock::test::withoutRule(line, "+publish"));
    CHECK_THROWS_WITH_AS((void)dlock::connect(uri), doctest::Contains("may not run PUBLISH"), dlock::BackendError);
  }

  TEST_CASE("Cluster: the README's ACL line for the nodes grants every primitive") {
    ClusterServers cluster;
    const std::vector<std::string> line = dlock::test::readmeAclLine("cluster");
    for (std::size_t i = 0; i < cluster.size(); ++i) cluster.client(i).ok(line);
    const std::string uri = dlock::test::withAclUser(cluster.uri());
    dlock::test::useEveryPrimitive(dlock::connect(uri));

    for (std::size_t i = 0; i < cluster.size(); ++i) cluster.client(i).ok(dlock::test::withoutRule(line, "+spublish"));
    CHECK_THROWS_WITH_AS((void)dlock::connect(uri), doctest::Contains("may not run SPUBLISH"), dlock::BackendError);
  }
}
