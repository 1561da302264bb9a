// SPDX-License-Identifier: Apache-2.0
// The README's least-privilege ACL lines for a Sentinel set's data nodes and a cluster's nodes: a
// user granted exactly the line passes connect() and runs every primitive; without the line's own
// pub/sub rule connect() fails naming it (the shared rules are each checked on one server, AclTest).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ClusterServers.h"
#include "ReadmeAcl.h"
#include "RedisClient.h"
#include "SentinelServers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"

using dlock::test::ClusterServers;
using dlock::test::RedisClient;
using dlock::test::SentinelServers;

TEST_SUITE("AclTopology") {
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
