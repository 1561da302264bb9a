// SPDX-License-Identifier: Apache-2.0
// Sentinel, Cluster and Redlock over TLS: the sentinels and the nodes they name, the cluster's
// nodes as CLUSTER SLOTS names them (tls-cluster yes), and redlock members of any scheme, each
// checked by locked increments from several processes.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "ClusterServers.h"
#include "ProcessIncrements.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "SentinelServers.h"
#include "TlsCertificates.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisProcess;
using dlock::test::SentinelServers;
using dlock::test::TlsCertificates;

namespace {

RedisProcess::Tls serverTls(const TlsCertificates& certificates) {
  return RedisProcess::Tls{certificates.server().cert, certificates.server().key, certificates.caFile(), false};
}

}  // namespace

TEST_SUITE("TlsTopology") {
  TEST_CASE("rediss+sentinel://: 3 processes x 200 locked increments end exact, through the master the sentinels name") {
    TlsCertificates certificates;
    SentinelServers::Options options;
    options.tls = serverTls(certificates);
    SentinelServers set(options);
    // The sentinels name the master's TLS port: a plain connection there would fail.
    CHECK(set.masterPort() == set.linkPort(0));
    RedisProcess counter;
    dlock::test::checkProcessIncrements(set.uri(), counter, 3, 200);
    // The lock keys went to the master over TLS.
    auto lock = dlock::LockBuilder().backend(dlock::connect(set.uri())).leaseTime(10s).build();
    REQUIRE(lock->tryLock("tls-sentinel-key"));
    CHECK(set.dataClient(0).ok({"EXISTS", "dlock:{tls-sentinel-key}"}).integer == 1);
    lock->unlock("tls-sentinel-key");
  }

  TEST_CASE("rediss+cluster:// with tls-cluster yes: 3 processes x 200 locked increments end exact") {
    TlsCertificates certificates;
    ClusterServers::Options options;
    options.tls = serverTls(certificates);
    ClusterServers cluster(options);
    // Redis answers CLUSTER SLOTS with the ports of the asking connection's kind: dlock, asking
    // over TLS, gets the TLS ports (a plain port would not complete its handshake).
    RedisProcess counter;
    dlock::test::checkProcessIncrements(cluster.uri(), counter, 3, 200);
  }

  TEST_CASE("a redlock of rediss:// and unix:// members: 3 processes x 200 locked increments end exact") {
    TlsCertificates certificates;
    RedisProcess::Options tls;
    tls.tls = serverTls(certificates);
    RedisProcess first(tls);
    RedisProcess second(tls);
    RedisProcess::Options socket;
    socket.unixSocket = true;
    RedisProcess third(socket);
    const std::string ca = "?tls_ca_file=" + certificates.caFile();
    const std::string uri = "redlock://rediss://127.0.0.1:" + std::to_string(first.tlsPort()) + ca +
                            ";rediss://localhost:" + std::to_string(second.tlsPort()) + ca + ";unix://" +
                            third.socketPath();
    RedisProcess counter;
    dlock::test::checkProcessIncrements(uri, counter, 3, 200);
  }
}
