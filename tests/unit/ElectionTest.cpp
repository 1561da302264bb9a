// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "dlock/LockError.h"
#include "dlock/core/Election.h"
#include "dlock/core/ElectionMetrics.h"
#include "dlock/core/Token.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::Event;
using dlock::test::VirtualFixture;

namespace {

constexpr const char* kKey = "election:scheduler";

struct ElectionFixture : VirtualFixture {
  std::shared_ptr<dlock::Election> election(std::chrono::milliseconds lease = 9s) const {
    return dlock::ElectionBuilder().backend(backend).clock(clock).name("scheduler").lease(lease).build();
  }
};

// Blocks (real time, bounded) until `backend` has `count` candidates queued.
bool waitForQueue(const dlock::MemoryOperator& backend, std::size_t count) {
  const auto give = std::chrono::steady_clock::now() + 10s;
  while (backend.queued(kKey) != count) {
    if (std::chrono::steady_clock::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

// What an observer reported, in order.
class Reports {
 public:
  void add(const dlock::LeaderInfo& info) {
    std::lock_guard<std::mutex> guard(mutex_);
    seen_.push_back(info);
    changed_.notify_all();
  }
  // The reports once there are at least `count` (real time, bounded); fewer if they never came.
  std::vector<dlock::LeaderInfo> waitFor(std::size_t count, std::chrono::milliseconds budget = 10s) {
    std::unique_lock<std::mutex> guard(mutex_);
    changed_.wait_for(guard, budget, [&] { return seen_.size() >= count; });
    return seen_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<dlock::LeaderInfo> seen_;
};

}  // namespace

TEST_SUITE("Election") {
  TEST_CASE("campaign on a free election leads at once and proclaims its value") {
    ElectionFixture f;
    auto election = f.election();
    CHECK_FALSE(election->leader().has_value());
    dlock::Leadership term = election->campaign("host-a:4711");
    REQUIRE(term.isLeader());
    CHECK(term.fencingToken() > 0);
    CHECK(term.validUntil() > f.clock->now());
    auto who = election->leader();
    REQUIRE(who.has_value());
    CHECK(who->term == term.fencingToken());
    CHECK(who->value == "host-a:4711");
    term.proclaim("host-a:4711 draining");
    CHECK(election->leader()->value == "host-a:4711 draining");
    CHECK(election->leading());
    CHECK(election->termsStarted() == 1);
  }

  TEST_CASE("candidates lead in FIFO order, each resign handing off with a higher term") {
    ElectionFixture f;
    auto a = f.election();
    auto b = f.election();
    auto c = f.election();
    dlock::Leadership first = a->campaign("a");
    dlock::Leadership second, third;
    Event secondLeads, thirdLeads;
    std::thread tb([&] {
      second = b->campaign("b");
      secondLeads.set();
    });
    REQUIRE(waitForQueue(*f.backend, 1));
    std::thread tc([&] {
      third = c->campaign("c");
      thirdLeads.set();
    });
    REQUIRE(waitForQueue(*f.backend, 2));
    const std::uint64_t firstTerm = first.fencingToken();
    first.resign();
    CHECK_FALSE(first);
    REQUIRE(secondLeads.wait());
    tb.join();
    CHECK(second.isLeader());
    CHECK(second.fencingToken() > firstTerm);
    CHECK(a->leader()->value == "b");
    CHECK_FALSE(thirdLeads.wait(0ms));
    second.resign();
    REQUIRE(thirdLeads.wait());
    tc.join();
    CHECK(third.fencingToken() > firstTerm);
    CHECK(a->leader()->value == "c");
  }

  TEST_CASE("a term renewed by the watchdog outlives its lease, and one unrenewed is lost at its deadline") {
    ElectionFixture f;
    auto election = f.election(9s);
    Event lost;
    std::atomic<std::uint64_t> lostTerm{0};
    election->onLost([&](const dlock::Leadership& gone) {
      lostTerm = gone.fencingToken();
      CHECK_FALSE(gone.isLeader());
      lost.set();
    });
    dlock::Leadership term = election->campaign("a");
    for (int i = 0; i < 6; ++i) f.clock->advance(3s);  // twice the lease, renewed every third
    CHECK(term.isLeader());
    CHECK(election->termsLost() == 0);
    f.backend->failNextCalls(1000000);  // the backend unreachable: no renewal answers
    for (int i = 0; i < 4 && !lost.wait(0ms); ++i) f.clock->advance(3s);
    REQUIRE(lost.wait());
    CHECK(lostTerm == term.fencingToken());
    CHECK_FALSE(term.isLeader());
    CHECK(election->termsLost() == 1);
    f.backend->failNextCalls(0);
    CHECK_THROWS_AS(term.proclaim("still me?"), dlock::LockLostError);
    CHECK(election->termsLost() == 1);  // reported once
  }

  TEST_CASE("proclaim after another candidate took over throws LockLostError and writes nothing") {
    ElectionFixture f;
    auto a = dlock::ElectionBuilder().backend(f.backend).clock(f.clock).name("scheduler").lease(9s).build();
    dlock::Leadership term = a->campaign("a");
    // The term's hold is gone on the server (as after a pause past the lease) and another leads.
    const std::string other = dlock::generateToken();
    const auto held = f.backend->holderOf(kKey);
    REQUIRE(f.backend->fairUnlock(kKey, held).released);
    const auto taken = f.backend->fairLock(kKey, other, 9s, 0ms);
    REQUIRE(taken.acquired);
    REQUIRE(f.backend->proclaim(kKey, other, taken.fencingToken, "b"));
    CHECK_THROWS_AS(term.proclaim("a again"), dlock::LockLostError);
    CHECK(a->leader()->value == "b");
    // An older term's record never replaces a later one's.
    CHECK_FALSE(f.backend->proclaim(kKey, other, taken.fencingToken - 1, "older"));
  }

  TEST_CASE("observe reports the leader, each new value and term in order, and none between terms") {
    ElectionFixture f;
    auto election = f.election();
    Reports reports;
    auto watch = election->observe([&](const dlock::LeaderInfo& now) { reports.add(now); });
    REQUIRE(reports.waitFor(1).size() == 1);
    dlock::Leadership first = election->campaign("a");
    REQUIRE(reports.waitFor(2).size() == 2);
    first.proclaim("a2");
    REQUIRE(reports.waitFor(3).size() == 3);
    first.resign();
    REQUIRE(reports.waitFor(4).size() == 4);
    dlock::Leadership second = election->campaign("b");
    const auto seen = reports.waitFor(5);
    REQUIRE(seen.size() == 5);
    CHECK_FALSE(seen[0].hasLeader);
    CHECK(seen[1].hasLeader);
    CHECK(seen[1].value == "a");
    CHECK(seen[2].value == "a2");
    CHECK(seen[2].term == seen[1].term);
    CHECK_FALSE(seen[3].hasLeader);
    CHECK(seen[4].value == "b");
    CHECK(seen[4].term > seen[1].term);
    for (const auto& report : seen) CHECK(report.skippedTerms == 0);
  }

  TEST_CASE("an observer reports none when a term's lease ends unrenewed, and counts a term it missed") {
    ElectionFixture f;
    auto election = f.election();
    Reports reports;
    // A leader that never renews: the fair lock's calls made by hand, as a process that died.
    const std::string dead = dlock::generateToken();
    const auto taken = f.backend->fairLock(kKey, dead, 9s, 0ms);
    REQUIRE(taken.acquired);
    REQUIRE(f.backend->proclaim(kKey, dead, taken.fencingToken, "dead"));
    auto watch = election->observe([&](const dlock::LeaderInfo& now) { reports.add(now); });
    REQUIRE(reports.waitFor(1).size() == 1);
    // The observer reads again just past the lease's end, on this clock; its wait may start
    // after an advance, so time goes on until it has read.
    f.clock->advance(9s + 1ms);
    for (int i = 0; i < 20 && reports.waitFor(2, 0ms).size() < 2; ++i) f.clock->advance(1s);
    auto seen = reports.waitFor(2);
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].value == "dead");
    CHECK_FALSE(seen[1].hasLeader);
    // A term that begins and ends with no message heard (as across a reconnect) is counted.
    const std::string brief = dlock::generateToken();
    const auto briefTerm = f.backend->fairLock(kKey, brief, 9s, 0ms);
    REQUIRE(f.backend->proclaim(kKey, brief, briefTerm.fencingToken, "brief"));  // publishes: the observer reads
    REQUIRE(f.backend->fairUnlock(kKey, brief).released);
    f.backend->announce(kKey);
    seen = reports.waitFor(4);
    // Either it read the brief term (then none), or it read none with one term skipped.
    const bool readIt = seen.size() >= 3 && seen[2].hasLeader;
    if (readIt) {
      REQUIRE(seen.size() == 4);
      CHECK(seen[2].value == "brief");
      CHECK_FALSE(seen[3].hasLeader);
    } else {
      REQUIRE(seen.size() >= 3);
      CHECK_FALSE(seen[2].hasLeader);
      CHECK(seen[2].skippedTerms == 1);
    }
  }

  TEST_CASE("a cancelled campaign throws InterruptedError and leaves no place in the queue") {
    ElectionFixture f;
    auto a = f.election();
    auto b = f.election();
    dlock::Leadership term = a->campaign("a");
    dlock::CancelSource stop;
    std::atomic<bool> interrupted{false};
    std::thread waiter([&] {
      try {
        (void)b->campaign("b", stop.token());
      } catch (const dlock::InterruptedError&) {
        interrupted = true;
      }
    });
    REQUIRE(waitForQueue(*f.backend, 1));
    stop.requestCancel();
    waiter.join();
    CHECK(interrupted);
    CHECK(f.backend->queued(kKey) == 0);
    CHECK(term.isLeader());
  }

  TEST_CASE("close ends the campaigns, resigns the terms and refuses new campaigns") {
    ElectionFixture f;
    auto a = f.election();
    auto b = f.election();
    dlock::Leadership term = a->campaign("a");
    std::atomic<bool> interrupted{false};
    std::thread waiter([&] {
      try {
        (void)b->campaign("b");
      } catch (const dlock::InterruptedError&) {
        interrupted = true;
      }
    });
    REQUIRE(waitForQueue(*f.backend, 1));
    b->close();
    waiter.join();
    CHECK(interrupted);
    a->close();
    CHECK_FALSE(term.isLeader());
    CHECK(f.backend->holderOf(kKey).empty());
    CHECK_THROWS_AS((void)a->campaign("a"), dlock::InterruptedError);
  }

  TEST_CASE("a destroyed Leadership resigns, and a moved one keeps its term") {
    ElectionFixture f;
    auto election = f.election();
    dlock::Leadership moved;
    {
      dlock::Leadership term = election->campaign("a");
      moved = std::move(term);
      CHECK_FALSE(term.isLeader());  // NOLINT(bugprone-use-after-move): moved-from is empty
      CHECK_THROWS_AS((void)term.fencingToken(), dlock::NotOwnerError);
    }
    CHECK(moved.isLeader());
    { dlock::Leadership gone = std::move(moved); }
    CHECK_FALSE(election->leader().has_value());
    CHECK_THROWS_AS(moved.resign(), dlock::NotOwnerError);  // NOLINT(bugprone-use-after-move)
  }

  TEST_CASE("bad input and a Redlock backend are refused with typed errors") {
    ElectionFixture f;
    auto election = f.election();
    CHECK_THROWS_AS((void)election->campaign(std::string(dlock::kMaxLeaderValueBytes + 1, 'x')),
                    dlock::InvalidArgumentError);
    CHECK(f.backend->holderOf(kKey).empty());
    CHECK_THROWS_AS((void)dlock::ElectionBuilder().backend(f.backend).build(), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::ElectionBuilder().name("x").build(), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::ElectionBuilder().backend(f.backend).name("x").lease(1ms).build(), dlock::ConfigError);
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (int i = 0; i < 3; ++i) members.push_back(std::make_shared<dlock::MemoryOperator>());
    auto redlock = std::make_shared<dlock::RedlockOperator>(members);
    CHECK_THROWS_WITH_AS((void)dlock::ElectionBuilder().backend(redlock).name("x").build(),
                         doctest::Contains("Redlock"), dlock::ConfigError);
  }

  TEST_CASE("a forked child is not leader and its Leadership sends nothing") {
    ElectionFixture f;
    auto election = f.election();
    dlock::Leadership term = election->campaign("a");
    const pid_t child = fork();
    if (child == 0) {
      int status = term.isLeader() ? 1 : 0;
      try {
        term.proclaim("child");
        status |= 2;
      } catch (const dlock::NotOwnerError&) {
      }
      { dlock::Leadership gone = std::move(term); }
      _exit(status);
    }
    REQUIRE(child > 0);
    int status = -1;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(term.isLeader());
    CHECK(election->leader()->value == "a");
  }

  TEST_CASE("formatElectionMetrics gives the leader gauge and the terms started and lost") {
    ElectionFixture f;
    auto election = f.election();
    dlock::Leadership term = election->campaign("a");
    const std::string text = dlock::formatElectionMetrics({election});
    CHECK(text.find("# TYPE dlock_election_leader gauge") != std::string::npos);
    CHECK(text.find("dlock_election_leader{election=\"scheduler\"} 1\n") != std::string::npos);
    CHECK(text.find("dlock_election_terms_started_total{election=\"scheduler\"} 1\n") != std::string::npos);
    CHECK(text.find("dlock_election_terms_lost_total{election=\"scheduler\"} 0\n") != std::string::npos);
    term.resign();
    CHECK(dlock::formatElectionMetrics({election}).find("dlock_election_leader{election=\"scheduler\"} 0\n") !=
          std::string::npos);
    CHECK_THROWS_AS((void)dlock::formatElectionMetrics({election, election}), dlock::ConfigError);
  }
}
