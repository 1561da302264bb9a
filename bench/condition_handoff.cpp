// SPDX-License-Identifier: Apache-2.0
// condition_handoff — what a signal costs on a fair key, beside the fair lock's plain hand-off,
// in the same run and on the same two clients (each its own backend: connection and grant
// subscription), driving the backend surfaces as the Condition and the fair lock drive them
// (IConditionOperator, IFairOperator; as bench/PrimitiveCycles.h does for the other primitives):
//  - condition: the awaiter holds the key and awaits (one script: joins the condition, releases
//    the key); the signaller takes the key, signals (the awaiter moves to the key's queue) and
//    releases it, which hands the key to the awaiter.
//  - fair: the waiter queues behind the holder; the holder releases, which hands the key over.
// Timed from the releasing call's start to the heir holding the key (its grant heard and
// confirmed by an extend, as GrantClaim.h confirms one), split at the grant heard. Counted per
// round with INFO commandstats around the signal + release + the heir's confirmation (the plain
// round: release + confirmation): the commands the clients sent and every server call (the
// scripts' own included). Kinds alternate in blocks so the machine's drift hits both alike.
// Usage: dlock_bench_condition_handoff redis://127.0.0.1:PORT [ROUNDS]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "PrimitiveCycles.h"
#include "RawRedis.h"
#include "dlock/IConditionOperator.h"
#include "dlock/IFairOperator.h"
#include "dlock/connect.h"
#include "dlock/core/Token.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using dlock::bench::require;

const std::string kKey = "bench:condition";
const std::string kName = "bench-signal";
constexpr std::chrono::milliseconds kLease = dlock::bench::kPrimitiveLease;
constexpr std::chrono::milliseconds kWaiterLease = dlock::bench::kWaiterLease;

// One client: its own backend, through the two surfaces a fair Condition uses.
struct Client {
  explicit Client(const std::string& uri)
      : backend(dlock::connect(uri)),
        fair(dynamic_cast<dlock::IFairOperator&>(*backend)),
        conditions(dynamic_cast<dlock::IConditionOperator&>(*backend)) {}
  std::shared_ptr<dlock::IOperator> backend;
  dlock::IFairOperator& fair;
  dlock::IConditionOperator& conditions;
};

// One round's times (µs from the releasing call's start) and server counts.
struct Round {
  double signalUs = 0;   // the signal call (0 in a plain round)
  double releaseUs = 0;  // the releasing call's return
  double heardUs = 0;    // the heir's grant heard
  double holdingUs = 0;  // the heir's extend confirmed it: it holds the key
  long long commands = 0;
  long long calls = 0;
};

// The heir's side: waits on `grants` in its own thread (entered before the release is sent),
// then confirms the grant as the fair lock does.
class Heir {
 public:
  Heir(Client& client, dlock::IGrantWatch& grants, const std::string& token)
      : thread_([this, &client, &grants, token] {
          entered_.store(true);
          const dlock::Grant grant = grants.waitForGrant(10s);
          heard_ = Clock::now();
          granted_ = grant.kind == dlock::Grant::Kind::Granted &&
                     client.backend->extend(kKey, token, kLease);
          holding_ = Clock::now();
        }) {
    while (!entered_.load()) std::this_thread::yield();
  }
  // Waits for the heir; false when it was not handed the key.
  bool join(Clock::time_point released, Round& round) {
    thread_.join();
    round.heardUs = std::chrono::duration<double, std::micro>(heard_ - released).count();
    round.holdingUs = std::chrono::duration<double, std::micro>(holding_ - released).count();
    return granted_;
  }

 private:
  std::atomic<bool> entered_{false};
  Clock::time_point heard_, holding_;
  bool granted_ = false;
  std::thread thread_;
};

// Times `release` (the call that hands the key to `heirToken`) and counts the server's work from
// `signal` (may do nothing) to the heir holding the key; then the heir releases it.
template <class Signal, class Release>
Round handOver(dlock::bench::RawRedis& admin, Client& heir, dlock::IGrantWatch& grants, const std::string& heirToken,
               Signal&& signal, Release&& release) {
  const auto before = admin.commandCalls();
  Round round;
  const Clock::time_point signalled = Clock::now();
  signal();
  round.signalUs = std::chrono::duration<double, std::micro>(Clock::now() - signalled).count();
  Heir waiting(heir, grants, heirToken);
  const Clock::time_point start = Clock::now();
  release();
  round.releaseUs = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  require(waiting.join(start, round), "the heir was not handed the key");
  const auto after = admin.commandCalls();
  round.commands = dlock::bench::RawRedis::clientCommands(after) - dlock::bench::RawRedis::clientCommands(before);
  round.calls = dlock::bench::RawRedis::serverCalls(after) - dlock::bench::RawRedis::serverCalls(before);
  require(heir.fair.fairUnlock(kKey, heirToken).released, "the heir's release found nothing");
  return round;
}

// The awaiter holds the key and awaits; the signaller takes it, signals and releases.
Round conditionRound(dlock::bench::RawRedis& admin, Client& awaiter, Client& signaller) {
  const std::string waiting = dlock::generateToken();
  const auto grants = awaiter.fair.watchGrants(kKey, waiting);
  const dlock::FairAcquireResult held = awaiter.fair.fairLock(kKey, waiting, kLease, kWaiterLease);
  require(held.acquired, "the awaiter did not get the free key");
  const dlock::AwaitResult awaited = awaiter.conditions.await(kKey, kName, waiting, dlock::ConditionLock::Fair,
                                                              held.fencingToken, kLease, kWaiterLease);
  require(awaited.awaiting, "the await was refused");
  const std::string signalling = dlock::generateToken();
  require(signaller.fair.fairLock(kKey, signalling, kLease, 0ms).acquired, "the await did not release the key");
  return handOver(
      admin, awaiter, *grants, waiting,
      [&] {
        require(signaller.conditions.signal(kKey, kName, signalling, dlock::ConditionLock::Fair).moved == 1,
                "the signal moved no waiter");
      },
      [&] { require(signaller.fair.fairUnlock(kKey, signalling).notified == 1, "the release handed nothing over"); });
}

// The holder holds the key, the waiter queues behind it; the holder releases.
Round fairRound(dlock::bench::RawRedis& admin, Client& waiter, Client& holder) {
  const std::string holding = dlock::generateToken();
  require(holder.fair.fairLock(kKey, holding, kLease, 0ms).acquired, "the holder did not get the free key");
  const std::string waiting = dlock::generateToken();
  const auto grants = waiter.fair.watchGrants(kKey, waiting);
  require(!waiter.fair.fairLock(kKey, waiting, kLease, kWaiterLease).acquired, "the waiter did not queue");
  return handOver(
      admin, waiter, *grants, waiting, [] {},
      [&] { require(holder.fair.fairUnlock(kKey, holding).notified == 1, "the release handed nothing over"); });
}

void report(const std::string& kind, const std::vector<Round>& rounds, double rttUs) {
  std::vector<double> signal, release, heard, holding;
  double commands = 0, calls = 0;
  for (const Round& round : rounds) {
    signal.push_back(round.signalUs);
    release.push_back(round.releaseUs);
    heard.push_back(round.heardUs);
    holding.push_back(round.holdingUs);
    commands += static_cast<double>(round.commands);
    calls += static_cast<double>(round.calls);
  }
  const double count = static_cast<double>(rounds.size());
  using dlock::bench::percentile;
  dlock::bench::JsonLine("condition_handoff")
      .field("kind", kind)
      .field("rounds", count)
      .field("rtt_us", rttUs)
      .field("handoff_p50_us", percentile(holding, 50))
      .field("handoff_p99_us", percentile(holding, 99))
      .field("handoff_p50_rtt", percentile(holding, 50) / rttUs)
      .field("signal_p50_us", percentile(signal, 50))
      .field("release_p50_us", percentile(release, 50))
      .field("heard_p50_us", percentile(heard, 50))
      .field("commands_per_handoff", commands / count)
      .field("calls_per_handoff", calls / count)
      .print();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc != 2 && argc != 3) {
      std::fprintf(stderr, "usage: %s redis://host:port [ROUNDS]\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const int rounds = argc == 3 ? std::atoi(argv[2]) : 2000;
    dlock::bench::RawRedis admin(uri);
    admin.command({"DEL", kKey});
    Client first(uri);
    Client second(uri);
    const double rttUs = admin.roundTripUs();
    for (int i = 0; i < 50; ++i) {  // warm-up: scripts loaded, subscriptions made
      (void)conditionRound(admin, first, second);
      (void)fairRound(admin, first, second);
    }
    std::vector<Round> condition, fair;
    constexpr int kBlock = 100;
    for (int done = 0; done < rounds; done += kBlock) {
      for (int i = 0; i < kBlock && done + i < rounds; ++i) condition.push_back(conditionRound(admin, first, second));
      for (int i = 0; i < kBlock && done + i < rounds; ++i) fair.push_back(fairRound(admin, first, second));
    }
    report("condition", condition, rttUs);
    report("fair", fair, rttUs);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_bench_condition_handoff: %s\n", error.what());
    return 1;
  }
}
