// SPDX-License-Identifier: Apache-2.0
// Elections against a real redis-server: candidates in threads and in processes
// (dlock_election_worker), FIFO hand-off by resign, a killed and a paused leader, observers, and
// a fenced store that takes rising terms only.
#include <doctest/doctest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ChildProcess.h"
#include "LeaderReports.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/Election.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;

namespace {

using Clock = std::chrono::steady_clock;

std::shared_ptr<dlock::Election> electionOn(const RedisProcess& server, const std::string& name,
                                            std::chrono::milliseconds lease = 15s) {
  return dlock::ElectionBuilder().backend(dlock::connect(server.uri())).name(name).lease(lease).build();
}

long long candidatesQueued(RedisClient& client, const std::string& name) {
  return client.ok({"LLEN", "dlock:{election:" + name + "}:fair:queue"}).integer;
}

double msBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

bool reportedTerm(const std::vector<dlock::LeaderInfo>& seen, std::uint64_t term) {
  return std::any_of(seen.begin(), seen.end(), [&](const auto& info) { return info.hasLeader && info.term == term; });
}

// Terms rise along the reports, and every one of `terms` (ascending) was reported or counted
// as skipped by the report after it: an observer reads on each change, so a term that began and
// ended between two reads is a flagged gap, never a silent one.
void checkInTermOrder(const std::vector<dlock::LeaderInfo>& seen, const std::vector<std::uint64_t>& terms) {
  std::uint64_t last = 0;
  std::vector<std::uint64_t> reported;
  std::uint64_t skipped = 0;
  for (const auto& info : seen) {
    CHECK(info.term >= last);
    last = std::max(last, info.term);
    skipped += info.skippedTerms;
    if (info.hasLeader && (reported.empty() || reported.back() != info.term)) reported.push_back(info.term);
  }
  CHECK(std::includes(terms.begin(), terms.end(), reported.begin(), reported.end()));
  CHECK(reported.size() + skipped == terms.size());
}

// A worker process: a candidate that writes its term to the fenced store while it leads.
struct Candidate {
  Candidate(const RedisProcess& server, const std::string& name, std::chrono::milliseconds lease,
            const std::string& value)
      : process({DLOCK_ELECTION_WORKER, server.uri(), name, std::to_string(lease.count()), value, server.host(),
                 std::to_string(server.port()), "fenced-store"}) {}

  // The next line that starts with `prefix`, skipping others; nullopt after `budget`.
  std::optional<std::string> lineStarting(const std::string& prefix, std::chrono::milliseconds budget = 30s) {
    const auto give = Clock::now() + budget;
    while (Clock::now() < give) {
      auto line = process.readLine(std::chrono::ceil<std::chrono::milliseconds>(give - Clock::now()));
      if (!line) return std::nullopt;
      if (line->rfind(prefix, 0) == 0) return line;
      lines.push_back(*line);
    }
    return std::nullopt;
  }
  std::uint64_t leadingTerm(std::chrono::milliseconds budget = 30s) {
    const auto line = lineStarting("leading ", budget);
    REQUIRE_MESSAGE(line.has_value(), "no 'leading' line; other lines: ", lines.size());
    return std::stoull(line->substr(8));
  }

  ChildProcess process;
  std::vector<std::string> lines;  // lines skipped by lineStarting
};

}  // namespace

TEST_SUITE("ElectionOnRedis") {
  TEST_CASE("candidates in threads lead in FIFO order, resign hands off, and observers see every term in order") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto watcher = electionOn(server, "fifo");
    dlock::test::LeaderReports reports;
    auto watch = watcher->observe([&](const dlock::LeaderInfo& now) { reports.add(now); });
    std::vector<std::shared_ptr<dlock::Election>> candidates;
    for (int i = 0; i < 3; ++i) candidates.push_back(electionOn(server, "fifo"));
    dlock::Leadership first = candidates[0]->campaign("c0");
    std::vector<dlock::Leadership> terms(3);
    std::vector<Clock::time_point> ledAt(3);
    std::mutex termsMutex;  // the candidates' threads fill terms and ledAt
    std::vector<std::thread> waiting;
    for (int i = 1; i < 3; ++i) {
      waiting.emplace_back([&, i] {
        auto term = candidates[static_cast<std::size_t>(i)]->campaign("c" + std::to_string(i));
        const std::lock_guard<std::mutex> guard(termsMutex);
        terms[static_cast<std::size_t>(i)] = std::move(term);
        ledAt[static_cast<std::size_t>(i)] = Clock::now();
      });
      REQUIRE(eventually([&] { return candidatesQueued(client, "fifo") == i; }));
    }
    const std::uint64_t firstTerm = first.fencingToken();
    const Clock::time_point resigned1 = Clock::now();
    first.resign();
    REQUIRE(eventually([&] {
      const std::lock_guard<std::mutex> guard(termsMutex);
      return terms[1].isLeader();
    }));
    const std::uint64_t secondTerm = terms[1].fencingToken();
    CHECK(secondTerm > firstTerm);
    CHECK(watcher->leader()->value == "c1");
    const Clock::time_point resigned2 = Clock::now();
    terms[1].resign();
    for (auto& thread : waiting) thread.join();
    REQUIRE(terms[2].isLeader());
    CHECK(terms[2].fencingToken() > firstTerm);
    const std::uint64_t lastTerm = terms[2].fencingToken();
    MESSAGE("resign to next leader (ms): ", msBetween(resigned1, ledAt[1]), ", ", msBetween(resigned2, ledAt[2]));
    terms[2].resign();
    const auto seen = reports.waitUntil([&](const auto& s) { return !s.empty() && reportedTerm(s, lastTerm) && !s.back().hasLeader; });
    REQUIRE(seen.size() >= 4);
    CHECK(reportedTerm(seen, firstTerm));
    CHECK_FALSE(seen.back().hasLeader);
    checkInTermOrder(seen, {firstTerm, secondTerm, lastTerm});
    CHECK_FALSE(watcher->leader().has_value());
  }

  TEST_CASE("five candidate processes: a killed leader is replaced within its lease, resign hands off, terms rise") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    constexpr auto kLease = 1500ms;
    auto watcher = electionOn(server, "procs");
    dlock::test::LeaderReports reports;
    auto watch = watcher->observe([&](const dlock::LeaderInfo& now) { reports.add(now); });
    std::vector<std::unique_ptr<Candidate>> candidates;
    candidates.push_back(std::make_unique<Candidate>(server, "procs", kLease, "p0"));
    const std::uint64_t term0 = candidates[0]->leadingTerm();
    for (int i = 1; i < 5; ++i) {
      candidates.push_back(std::make_unique<Candidate>(server, "procs", kLease, "p" + std::to_string(i)));
      REQUIRE(eventually([&] { return candidatesQueued(client, "procs") == i; }));
    }
    const Clock::time_point killedAt = Clock::now();
    candidates[0]->process.signal(SIGKILL);
    const std::uint64_t term1 = candidates[1]->leadingTerm();
    const double takeover = msBetween(killedAt, Clock::now());
    CHECK(term1 > term0);
    // The dead leader's hold lasts at most its lease from its last renewal; the heir's recheck
    // follows within a round trip (the budget: twice the lease, for a busy machine).
    CHECK(takeover < static_cast<double>(2 * kLease.count()));
    candidates[1]->process.writeLine("resign");
    const Clock::time_point resignedAt = Clock::now();
    const std::uint64_t term2 = candidates[2]->leadingTerm();
    const double handOff = msBetween(resignedAt, Clock::now());
    CHECK(term2 > term1);
    REQUIRE(candidates[1]->lineStarting("resigned").has_value());
    MESSAGE("lease ", kLease.count(), " ms: death to new leader ", takeover, " ms; resign to next leader ", handOff,
            " ms (process output included)");
    const auto seen = reports.waitUntil([&](const auto& s) { return reportedTerm(s, term2); });
    CHECK(reportedTerm(seen, term0));
    CHECK(reportedTerm(seen, term2));
    checkInTermOrder(seen, {term0, term1, term2});
    REQUIRE(eventually([&] { return client.ok({"GET", "fenced-store"}).str == std::to_string(term2); }));
    for (auto& candidate : candidates) {
      for (const auto& line : candidate->lines) CHECK_MESSAGE(line.rfind("refused", 0) != 0, line);
    }
  }

  TEST_CASE("a paused leader loses its term at its deadline, its successor leads, and its proclaim fails") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    constexpr auto kLease = 1000ms;
    Candidate paused(server, "pause", kLease, "a");
    const std::uint64_t pausedTerm = paused.leadingTerm();
    Candidate next(server, "pause", kLease, "b");
    REQUIRE(eventually([&] { return candidatesQueued(client, "pause") == 1; }));
    paused.process.signal(SIGSTOP);
    const std::uint64_t nextTerm = next.leadingTerm();
    CHECK(nextTerm > pausedTerm);
    paused.process.signal(SIGCONT);
    const auto lost = paused.lineStarting("lost ");
    REQUIRE(lost.has_value());
    CHECK(*lost == "lost " + std::to_string(pausedTerm));
    paused.process.writeLine("proclaim a is back");
    CHECK(paused.lineStarting("proclaim").value_or("") == "proclaim-lost");
    auto observer = electionOn(server, "pause");
    CHECK(observer->leader()->value == "b");
    CHECK(observer->leader()->term == nextTerm);
    // The fenced store holds the successor's term: the paused leader's late writes were refused.
    REQUIRE(eventually([&] { return client.ok({"GET", "fenced-store"}).str == std::to_string(nextTerm); }));
  }

  TEST_CASE("an observer reports none within a round trip of a lease's end, and again after a reconnect") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    constexpr auto kLease = 1000ms;
    auto watcher = electionOn(server, "expiry");
    dlock::test::LeaderReports reports;
    auto watch = watcher->observe([&](const dlock::LeaderInfo& now) { reports.add(now); });
    Candidate dying(server, "expiry", kLease, "a");
    const std::uint64_t term = dying.leadingTerm();
    REQUIRE(reports.waitUntil([&](const auto& s) { return reportedTerm(s, term); }).size() >= 2);
    dying.process.signal(SIGKILL);
    (void)dying.process.wait();
    const Clock::time_point killedAt = Clock::now();
    const auto seen = reports.waitUntil([&](const auto& s) { return !s.back().hasLeader; });
    const double noneAfter = msBetween(killedAt, Clock::now());
    REQUIRE_FALSE(seen.back().hasLeader);
    CHECK(seen.back().term == term);
    CHECK(noneAfter < static_cast<double>(2 * kLease.count()));
    MESSAGE("none reported ", noneAfter, " ms after the leader died (lease ", kLease.count(), " ms)");
    // A reconnect makes the observer read again: a term that began and ended meanwhile is counted.
    auto other = electionOn(server, "expiry");
    client.ok({"CLIENT", "KILL", "TYPE", "pubsub"});
    { dlock::Leadership brief = other->campaign("brief"); }
    const auto after = reports.waitUntil([&](const auto& s) {
      return std::any_of(s.begin(), s.end(), [](const auto& i) { return i.value == "brief" || i.skippedTerms > 0; }) &&
             !s.back().hasLeader;
    });
    CHECK(std::any_of(after.begin(), after.end(),
                      [](const auto& i) { return i.value == "brief" || i.skippedTerms == 1; }));
  }
}
