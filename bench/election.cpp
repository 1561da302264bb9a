// SPDX-License-Identifier: Apache-2.0
// election — leader election's rows, all in one run against one server: the machine's round trip
// (raw PING p50); resign-to-next-leader (two candidates taking turns, each term resigned at once:
// the resign call's start to the heir's campaign() returning) p50/p99 in ms and in RTTs; an
// observer's change latency (the same resign's start to the observer's report of the heir) and
// the terms it reported as skipped; death-to-new-leader at a short lease (a candidate process
// leading, SIGKILLed, a candidate queued behind it: the kill to its campaign() returning); and
// the server's work per renewal tick with 1 and with several terms held at once in one process
// (INFO commandstats before and after a few ticks: the commands the clients sent, and every call
// the server ran, the scripts' own included).
// Usage: dlock_bench_election redis://127.0.0.1:PORT TRIALS [DEATH_LEASE_MS]
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "RawRedis.h"
#include "Workers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/Election.h"
#include "redis/src/KeyNames.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double msBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

std::shared_ptr<dlock::Election> electionOn(const std::string& uri, const std::string& name, milliseconds lease) {
  return dlock::ElectionBuilder().backend(dlock::connect(uri)).name(name).lease(lease).build();
}

// One term of the turn-taking run: when its campaign returned and when its resign was called.
struct Turn {
  std::size_t candidate = 0;
  std::uint64_t term = 0;
  Clock::time_point led;
  Clock::time_point resigning;
};

struct HandoffResult {
  std::vector<double> handoffMs;   // a resign's start to the heir's campaign() return
  std::vector<double> observerMs;  // the same resign's start to the observer's report of the heir
  long long unreported = 0;        // heirs the observer reported as skipped, or not at all
};

// Two candidates take turns `trials` times; a third Election observes.
HandoffResult measureHandoffs(const std::string& uri, int trials) {
  const std::string name = "bench:election-handoff";
  std::mutex mutex;
  std::vector<Turn> turns;                                // guarded by mutex
  std::vector<std::pair<std::uint64_t, Clock::time_point>> reports;  // guarded by mutex
  auto observer = electionOn(uri, name, milliseconds(2000));
  dlock::ElectionWatch watch = observer->observe([&](const dlock::LeaderInfo& now) {
    const auto at = Clock::now();
    const std::lock_guard<std::mutex> guard(mutex);
    if (now.hasLeader) reports.emplace_back(now.term, at);
  });
  std::atomic<int> left{trials};
  std::vector<std::shared_ptr<dlock::Election>> candidates = {electionOn(uri, name, milliseconds(2000)),
                                                              electionOn(uri, name, milliseconds(2000))};
  std::vector<std::thread> threads;
  for (std::size_t index = 0; index < candidates.size(); ++index) {
    threads.emplace_back([&, index] {
      const auto& candidate = candidates[index];
      try {
        while (left.fetch_sub(1) > 0) {
          dlock::Leadership term = candidate->campaign("bench");
          Turn turn{index, term.fencingToken(), Clock::now(), {}};
          turn.resigning = Clock::now();
          term.resign();
          const std::lock_guard<std::mutex> guard(mutex);
          turns.push_back(turn);
        }
      } catch (const dlock::LockError&) {  // closed by the other candidate, its last turn over
      }
      for (auto& other : candidates) {
        if (other != candidate) other->close();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  std::this_thread::sleep_for(milliseconds(100));  // the last report's delivery
  watch.stop();
  std::sort(turns.begin(), turns.end(), [](const Turn& a, const Turn& b) { return a.term < b.term; });
  HandoffResult result;
  for (std::size_t i = 1; i < turns.size(); ++i) {
    if (turns[i].candidate == turns[i - 1].candidate) continue;  // nobody queued: no hand-off
    result.handoffMs.push_back(msBetween(turns[i - 1].resigning, turns[i].led));
    const auto seen = std::find_if(reports.begin(), reports.end(), [&](const auto& r) { return r.first == turns[i].term; });
    if (seen == reports.end()) {
      ++result.unreported;
    } else {
      result.observerMs.push_back(msBetween(turns[i - 1].resigning, seen->second));
    }
  }
  return result;
}

// The worker: leads `name` with `lease` and sleeps until it is killed.
int leadUntilKilled(const std::string& uri, const std::string& name, long long leaseMs) {
  auto election = electionOn(uri, name, milliseconds(leaseMs));
  dlock::Leadership term = election->campaign("doomed");
  while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// A candidate process leads; this one queues behind it; the leader is SIGKILLed: the kill to
// this campaign's return, `trials` times.
std::vector<double> measureDeaths(const char* program, const std::string& uri, int trials, long long leaseMs) {
  const std::string name = "bench:election-death";
  dlock::bench::RawRedis admin(uri);
  const std::string queue = dlock::detail::KeyNames("dlock:", "election:" + name, false).fairQueue();
  auto survivor = electionOn(uri, name, milliseconds(leaseMs));
  std::vector<double> deaths;
  for (int i = 0; i < trials; ++i) {
    const pid_t leader = dlock::bench::spawnWorker(program, {uri, name, std::to_string(leaseMs)});
    while (true) {  // the server's record shows the worker leading
      const auto now = survivor->leader();
      if (now && now->value == "doomed") break;
      std::this_thread::sleep_for(milliseconds(1));
    }
    Clock::time_point led;
    std::thread candidate([&] {
      dlock::Leadership term = survivor->campaign("survivor");
      led = Clock::now();
      term.resign();
    });
    while (std::atoll(admin.text({"LLEN", queue}).c_str()) < 1) std::this_thread::sleep_for(milliseconds(1));
    const auto killed = Clock::now();
    ::kill(leader, SIGKILL);
    ::waitpid(leader, nullptr, 0);
    candidate.join();
    deaths.push_back(msBetween(killed, led));
  }
  return deaths;
}

struct TickCost {
  double commandsPerTick = 0;  // what the clients sent (EVALSHA ...)
  double callsPerTick = 0;     // every call the server ran, the scripts' own included
};

// `terms` elections led at once in this process (one backend), idle for `ticks` renewal periods.
TickCost measureRenewals(const std::string& uri, int terms, long long leaseMs, int ticks) {
  const auto backend = dlock::connect(uri);
  std::vector<std::shared_ptr<dlock::Election>> elections;
  std::vector<dlock::Leadership> held;
  for (int i = 0; i < terms; ++i) {
    elections.push_back(dlock::ElectionBuilder()
                            .backend(backend)
                            .name("bench:election-renewal-" + std::to_string(terms) + "-" + std::to_string(i))
                            .lease(milliseconds(leaseMs))
                            .build());
    held.push_back(elections.back()->campaign("bench"));
  }
  dlock::bench::RawRedis admin(uri);
  std::this_thread::sleep_for(milliseconds(leaseMs / 6));  // between two ticks
  const auto before = admin.commandCalls();
  std::this_thread::sleep_for(milliseconds(leaseMs / 3 * ticks));
  const auto after = admin.commandCalls();
  for (auto& term : held) term.resign();
  const auto delta = [&](long long (*count)(const std::map<std::string, long long>&)) {
    return static_cast<double>(count(after) - count(before)) / ticks;
  };
  return {delta(&dlock::bench::RawRedis::clientCommands), delta(&dlock::bench::RawRedis::serverCalls)};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::string(argv[1]) == "--worker") return leadUntilKilled(argv[2], argv[3], std::atoll(argv[4]));
    if (argc != 3 && argc != 4) {
      std::fprintf(stderr, "usage: %s redis://host:port TRIALS [DEATH_LEASE_MS]\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const int trials = std::atoi(argv[2]);
    const long long deathLeaseMs = argc == 4 ? std::atoll(argv[3]) : 300;
    dlock::bench::RawRedis admin(uri);
    const double rttUs = admin.roundTripUs();
    const double rttMs = rttUs / 1e3;
    const HandoffResult handoffs = measureHandoffs(uri, trials);
    const std::vector<double> deaths = measureDeaths(argv[0], uri, std::max(3, trials / 30), deathLeaseMs);
    constexpr long long kRenewalLeaseMs = 1500;
    constexpr int kTicks = 6;
    constexpr int kTerms = 8;
    const TickCost one = measureRenewals(uri, 1, kRenewalLeaseMs, kTicks);
    const TickCost several = measureRenewals(uri, kTerms, kRenewalLeaseMs, kTicks);
    const double handoffP50 = dlock::bench::percentile(handoffs.handoffMs, 50);
    const double handoffP99 = dlock::bench::percentile(handoffs.handoffMs, 99);
    dlock::bench::JsonLine("election")
        .field("rtt_us", rttUs)
        .field("handoffs", static_cast<double>(handoffs.handoffMs.size()))
        .field("handoff_p50_ms", handoffP50)
        .field("handoff_p99_ms", handoffP99)
        .field("handoff_p50_rtt", handoffP50 / rttMs)
        .field("handoff_p99_rtt", handoffP99 / rttMs)
        .field("observer_p50_ms", dlock::bench::percentile(handoffs.observerMs, 50))
        .field("observer_p99_ms", dlock::bench::percentile(handoffs.observerMs, 99))
        .field("observer_unreported", static_cast<double>(handoffs.unreported))
        .field("death_lease_ms", static_cast<double>(deathLeaseMs))
        .field("deaths", static_cast<double>(deaths.size()))
        .field("death_p50_ms", dlock::bench::percentile(deaths, 50))
        .field("death_max_ms", dlock::bench::percentile(deaths, 100))
        .field("renewal_lease_ms", static_cast<double>(kRenewalLeaseMs))
        .field("one_term_commands_per_tick", one.commandsPerTick)
        .field("one_term_calls_per_tick", one.callsPerTick)
        .field("terms", static_cast<double>(kTerms))
        .field("terms_commands_per_tick", several.commandsPerTick)
        .field("terms_calls_per_tick", several.callsPerTick)
        .print();
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "election: %s\n", error.what());
    return 1;
  }
}
