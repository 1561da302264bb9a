// SPDX-License-Identifier: Apache-2.0
// A child may be forked at any instant, even while the parent's threads make their first lock
// call: it must never wait on one-time initialisation a parent thread was inside at the fork
// (issue 30: a child blocked for ever in __cxa_guard_acquire under acquireScript()).
// Each round is a fresh worker process (ForkFirstCall.h), so its calls really are the first;
// rounds move the first fork and the spacing of the next ones across the first calls.
#include <doctest/doctest.h>

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "ClusterServers.h"
#include "RedisProcess.h"
#include "SentinelServers.h"
#include "TlsCertificates.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisProcess;

namespace {

constexpr int kRounds = 8;
constexpr int kThreads = 4;
// A worker's children get 10 s each from their fork (kForkedCycleBudget); the worker also runs
// its own first calls and prints a hung child's stacks with gdb: far below this.
constexpr auto kWorkerBudget = 120s;

struct Sweep {
  long firstForkStep;  // µs: round r forks first r × this after the first calls start
  bool fair;           // every other thread (and every child) also takes a fair lock
};

// What a first call costs: on Redis backends milliseconds (connections, the scripts' first use),
// in memory a few hundred µs.
constexpr Sweep kRedis{250, true};

// Runs the rounds; returns how many forks landed while the parent's first calls were running.
int forkAtFirstCalls(const std::string& uri, Sweep sweep) {
  int inside = 0;
  for (int round = 0; round < kRounds; ++round) {
    const long first = sweep.firstForkStep * round;
    const long every = 100 + 50 * (round % 3);
    ChildProcess worker({DLOCK_TEST_WORKER, "fork-first-call", uri, "fork-first-call:" + std::to_string(round),
                         std::to_string(kThreads), std::to_string(first), std::to_string(every),
                         sweep.fair ? "fair" : "plain"});
    std::string output;
    while (auto line = worker.readLine(kWorkerBudget)) output += *line + "\n";
    const std::optional<int> status = worker.waitFor(kWorkerBudget);
    INFO("round ", round, " (first fork at ", first, " us, then every ", every, " us):\n", output);
    REQUIRE(status.has_value());
    REQUIRE(*status == 0);
    std::istringstream summary(output);
    std::string word;
    int forks = 0;
    int landed = 0;
    summary >> word >> forks >> word >> landed;  // "forks N inside M ..."
    inside += landed;
  }
  return inside;
}

}  // namespace

TEST_SUITE("ForkFirstCall") {
  TEST_CASE("children forked during the first lock calls on memory:// all finish their own lock cycle") {
    const int inside = forkAtFirstCalls("memory://", Sweep{40, true});
    CHECK(inside > 0);
  }

  TEST_CASE("children forked during the first lock calls on redis:// all finish their own lock cycle") {
    RedisProcess server;
    const int inside = forkAtFirstCalls(server.uri(), kRedis);
    CHECK(inside > 0);
  }

  TEST_CASE("children forked during the first lock calls on rediss:// (TLS) all finish their own lock cycle") {
    dlock::test::TlsCertificates certificates;
    RedisProcess::Options options;
    options.tls = RedisProcess::Tls{certificates.server().cert, certificates.server().key, certificates.caFile(), false};
    RedisProcess server(options);
    const std::string uri =
        "rediss://127.0.0.1:" + std::to_string(server.tlsPort()) + "?tls_ca_file=" + certificates.caFile();
    const int inside = forkAtFirstCalls(uri, kRedis);
    CHECK(inside > 0);
  }

  TEST_CASE("children forked during the first lock calls on redis+sentinel:// all finish their own lock cycle") {
    dlock::test::SentinelServers servers;
    const int inside = forkAtFirstCalls(servers.uri(), kRedis);
    CHECK(inside > 0);
  }

  TEST_CASE("children forked during the first lock calls on redis+cluster:// all finish their own lock cycle") {
    dlock::test::ClusterServers::Options options;
    options.replicasPerMaster = 0;
    dlock::test::ClusterServers servers(options);
    const int inside = forkAtFirstCalls(servers.uri(), kRedis);
    CHECK(inside > 0);
  }

  TEST_CASE("children forked during the first lock calls on redlock:// all finish their own lock cycle") {
    std::vector<std::unique_ptr<RedisProcess>> servers;
    std::string uri = "redlock://";
    for (int i = 0; i < 3; ++i) {
      servers.push_back(std::make_unique<RedisProcess>());
      uri += (i > 0 ? "," : "") + servers.back()->host() + ":" + std::to_string(servers.back()->port());
    }
    // Redlock waits 100 ms for a node by default; dozens of children connecting on a busy machine
    // answer slower than that, and what is checked here is the fork, not the node budget.
    uri += "?node_timeout=2s";
    const int inside = forkAtFirstCalls(uri, Sweep{250, false});  // no fair queue across independent servers
    CHECK(inside > 0);
  }
}

#endif  // DLOCK_TEST_FORK_WITH_THREADS
