// SPDX-License-Identifier: Apache-2.0
// Elections on Sentinel and Cluster: candidates in FIFO order handing off by resign with rising
// terms, an observer seeing every term in order and "none" at the end (sharded pub/sub on a
// cluster), and on Sentinel the same again on the promoted replica after a failover.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ClusterServers.h"
#include "LeaderReports.h"
#include "RedisClient.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"
#include "dlock/core/Election.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
using dlock::test::SentinelServers;
using dlock::test::eventually;

namespace {

std::shared_ptr<dlock::Election> electionOn(const std::string& uri, const std::string& name) {
  return dlock::ElectionBuilder().backend(dlock::connect(uri)).name(name).build();
}

// `count` candidates queue one after the other (`queued()`: how many the server has) behind a
// leader; each resign hands the term to the next, terms rise, and an observer sees every term in
// order, then "none" after the last resign.
void checkHandOffs(const std::string& uri, const std::string& name, int count, const std::function<long long()>& queued) {
  auto watcher = electionOn(uri, name);
  dlock::test::LeaderReports reports;
  auto watch = watcher->observe([&](const dlock::LeaderInfo& now) { reports.add(now); });
  std::vector<std::shared_ptr<dlock::Election>> candidates;
  for (int i = 0; i <= count; ++i) candidates.push_back(electionOn(uri, name));
  std::vector<dlock::Leadership> terms(static_cast<std::size_t>(count) + 1);
  terms[0] = candidates[0]->campaign("c0");
  std::mutex termsMutex;  // the candidates' threads fill terms
  std::vector<std::thread> waiting;
  for (int i = 1; i <= count; ++i) {
    waiting.emplace_back([&, i] {
      auto term = candidates[static_cast<std::size_t>(i)]->campaign("c" + std::to_string(i));
      const std::lock_guard<std::mutex> guard(termsMutex);
      terms[static_cast<std::size_t>(i)] = std::move(term);
    });
    REQUIRE(eventually([&] { return queued() == i; }));
  }
  std::vector<std::uint64_t> numbers{terms[0].fencingToken()};
  for (int i = 1; i <= count; ++i) {
    terms[static_cast<std::size_t>(i) - 1].resign();
    REQUIRE(eventually([&] {
      const std::lock_guard<std::mutex> guard(termsMutex);
      return terms[static_cast<std::size_t>(i)].isLeader();
    }));
    numbers.push_back(terms[static_cast<std::size_t>(i)].fencingToken());
    CHECK(numbers.back() > numbers[numbers.size() - 2]);
  }
  for (auto& thread : waiting) thread.join();
  // The last term lasts until the observer names it (a term that ends between two of its reads
  // is only counted as skipped); then its resign must show as "none".
  (void)reports.waitUntil([&](const auto& s) {
    return std::any_of(s.begin(), s.end(), [&](const auto& r) { return r.hasLeader && r.term == numbers.back(); });
  });
  terms.back().resign();
  const auto seen = reports.waitUntil([&](const auto& s) {
    return std::any_of(s.begin(), s.end(), [&](const auto& r) { return r.term == numbers.back(); }) && !s.back().hasLeader;
  });
  // Each term reported in order, or counted as skipped by the report after it (a term that began
  // and ended between two of the observer's reads).
  std::vector<std::uint64_t> reported;
  std::uint64_t skipped = 0;
  for (const auto& report : seen) {
    skipped += report.skippedTerms;
    if (report.hasLeader && (reported.empty() || reported.back() != report.term)) reported.push_back(report.term);
  }
  CHECK(std::includes(numbers.begin(), numbers.end(), reported.begin(), reported.end()));
  CHECK(reported.size() + skipped == numbers.size());
  CHECK(reported.front() == numbers.front());
  CHECK(reported.back() == numbers.back());
  REQUIRE_FALSE(seen.empty());
  CHECK_FALSE(seen.back().hasLeader);
}

}  // namespace

TEST_SUITE("ElectionTopology") {
  TEST_CASE("Sentinel: resign hands off in FIFO order and observers see every term, before and after a failover") {
    SentinelServers set;
    const auto queueOnMaster = [&](const std::string& name) {
      return [&set, name] {
        auto master = set.dataClient(set.nodeOfPort(set.masterPort()));
        return master.ok({"LLEN", "dlock:{election:" + name + "}:fair:queue"}).integer;
      };
    };
    checkHandOffs(set.uri(), "before", 3, queueOnMaster("before"));
    const int oldMaster = set.masterPort();
    set.failover();
    const int newMaster = set.waitForMasterOtherThan(oldMaster, 30s);
    set.waitForAllSentinelsToName(newMaster, 10s);
    checkHandOffs(set.uri(), "after", 3, queueOnMaster("after"));
  }

  TEST_CASE("Cluster: resign hands off in FIFO order and observers see every term over sharded pub/sub") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const std::string name = "scheduler";
    // The election's fair lock has the key "election:<name>".
    RedisClient owner = cluster.client(owners[dlock::clusterKeyNames("dlock:", "election:" + name).slot]);
    checkHandOffs(cluster.uri(), name, 3,
                  [&] { return owner.ok({"LLEN", "dlock:{election:" + name + "}:fair:queue"}).integer; });
  }
}
