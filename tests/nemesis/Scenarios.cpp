// SPDX-License-Identifier: Apache-2.0
// The scenarios of every topology. Each nemesis draws its choices (which client, which nodes,
// how long within bounds) from the run's seed, so `scripts/nemesis --seed S --scenario X`
// replays the same schedule.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "AwaiterFaults.h"
#include "ClusterDeployment.h"
#include "redis/src/KeyNames.h"
#include "RedisClient.h"
#include "Scenario.h"
#include "SentinelDeployment.h"
#include "WaiterFaults.h"

namespace dlock::nemesis {

using std::chrono::milliseconds;

milliseconds Run::between(milliseconds low, milliseconds high) {
  std::uniform_int_distribution<long long> draw(low.count(), high.count());
  return milliseconds(draw(random_));
}

std::size_t Run::pick(std::size_t count) {
  std::uniform_int_distribution<std::size_t> draw(0, count - 1);
  return draw(random_);
}

std::optional<Target> Run::holdLong(milliseconds lease, milliseconds max) { return holdLong(lease, max, 0); }

std::optional<Target> Run::holdLong(milliseconds lease, milliseconds max, std::uint32_t role) {
  // Long enough for the first key's current holder to let go and the acquire to get through.
  const milliseconds budget = timing_.acquireTimeout * 4 + timing_.holdMax * 2;
  const std::size_t first = pick(fleet_.size());
  for (std::size_t i = 0; i < 2; ++i) {
    const std::size_t slot = (first + i) % fleet_.size();
    fleet_.requestHold(slot, lease, max, milliseconds(0), role);
    if (fleet_.waitHolding(slot, budget)) return Target{slot, fleet_.id(slot), fleet_.firstKey()};
  }
  missed("no client got inside a hold of the first key");
  return std::nullopt;
}

void Run::awaitDrawnMoment(const Target& target, bool renewed) {
  const std::size_t draw = renewed ? 1 + pick(3) : pick(4);
  if (draw == 0) {
    moment_ = "at the hold's start";
    return;
  }
  const std::size_t renewals = draw == 2 ? 3 : 1;
  // The target's `lease` records of its key since its hold began: its renewals (the evidence).
  const auto renewalsSeen = [&](std::int64_t& lastNs) {
    std::optional<std::int64_t> startNs;
    std::size_t seen = 0;
    for (const Op& op : fleet_.history()) {
      if (op.process != target.process || op.key != target.key) continue;
      if (op.op == "hold-start") {
        startNs = op.timeNs;
        seen = 0;
      } else if (op.op == "lease" && startNs && op.timeNs > *startNs) {
        ++seen;
        lastNs = op.timeNs;
      }
    }
    return seen;
  };
  const auto deadline = std::chrono::steady_clock::now() + timing_.lease * (renewals + 1);
  std::int64_t lastNs = 0;
  while (renewalsSeen(lastNs) < renewals) {
    if (std::chrono::steady_clock::now() >= deadline) {
      moment_ = "before its renewal " + std::to_string(renewals) + ", none seen in time";
      return;
    }
    sleep(milliseconds(20));
  }
  if (draw != 3) {
    moment_ = "after " + std::to_string(renewals) + (renewals == 1 ? " renewal" : " renewals");
    return;
  }
  // The watchdog renews every third of the lease: strike a few ms before the next one is sent.
  const std::int64_t dueNs = lastNs + std::chrono::duration_cast<std::chrono::nanoseconds>(timing_.lease / 3).count() -
                             5'000'000;
  const std::int64_t waitNs = dueNs - monotonicNs();
  if (waitNs > 0) sleep(std::chrono::duration_cast<milliseconds>(std::chrono::nanoseconds(waitNs)));
  moment_ = "during renewal 2";
}

void Run::missed(const std::string& why) {
  if (missRecorder_) missRecorder_(why);
}

bool Run::waitTaken(const Target& target, std::int64_t sinceNs, milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    for (const Op& op : fleet_.history()) {
      if (op.op == "acquire" && op.kind == Kind::Ok && op.key == target.key && op.process != target.process &&
          op.timeNs > sinceNs) {
        return true;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    sleep(milliseconds(20));
  }
}

void Run::endHoldAfterTaken(const Target& target, milliseconds budget) {
  (void)waitTaken(target, monotonicNs(), budget);
  fleet_.endHold(target.slot);
}

void Run::sleep(milliseconds duration) { std::this_thread::sleep_for(duration); }

void Run::fault(const std::string& faultName, milliseconds length, const std::function<void()>& inject,
                const std::function<void()>& heal, const Target* target) {
  const std::string name = moment_.empty() ? faultName : faultName + " (" + moment_ + ")";
  moment_.clear();
  recorder_(name, true, target);
  inject();
  sleep(length);
  sample_();
  heal();
  sample_();
  recorder_(name, false, target);
}

namespace {

constexpr const char* kPauseExplained =
    "a holder stopped past its lease keeps running its critical section after the key expired; "
    "only the fencing token keeps its late write out";
constexpr const char* kLostWritesExplained =
    "the server lost acknowledged writes (the lock key among them), so a second client took the key";
constexpr const char* kFailoverExplained =
    "the master acknowledged locks its replicas had not received when it died, so the promoted replica "
    "let a second client take them (asynchronous replication)";
constexpr const char* kClockExplained = "the server's clock jumped past the lease, so the key expired early";
constexpr const char* kClockBackAndLostWritesExplained =
    "the server restarted empty with its clock an hour back: the fence counter was lost and the clock floor is below "
    "the tokens handed out before";
constexpr const char* kReplicaClockAheadExplained =
    "the promoted replica's clock ran past the lease ahead of the old master's, so it expired the keys at once "
    "(and replication is asynchronous)";
constexpr const char* kReplicaClockBackExplained =
    "the promoted replica lacked the last 15 s of writes and its clock was 10 s behind: the fence counters were "
    "behind and the clock floor below the tokens handed out";
constexpr const char* kMinorityClocksExplained =
    "two nodes' clocks jumped past the lease: a holder that had won with a bare quorum lost its copies there, and "
    "another client made a quorum with them (Redlock assumes bounded clock drift)";
constexpr const char* kClockAndLostWritesExplained =
    "two nodes' clocks jumped past the lease and a third lost its writes, so a quorum of three let a second client in";

// A hold that outlives a server's recovery: a fixed lease far beyond the fault and the promotion,
// so that the release, not the watchdog, is the first command after it (over a pooled
// connection the fault broke: the path where an in-doubt release can hide a loss).
constexpr milliseconds kOutlivingLease{30000};
constexpr milliseconds kOutlivingHold{60000};
// After the heal, how long an outliving hold waits for another client to take its key.
constexpr milliseconds kTakeBudget{3000};

using Deploy = std::function<std::unique_ptr<Deployment>(std::size_t)>;

Deploy single(Persistence persistence = Persistence::none, bool fakeClock = false) {
  return [=](std::size_t clients) {
    return std::make_unique<SingleDeployment>(clients, SingleDeployment::Options{persistence, fakeClock});
  };
}

std::unique_ptr<Deployment> redlock(std::size_t clients) { return std::make_unique<RedlockDeployment>(clients); }
std::unique_ptr<Deployment> redlockWithClocks(std::size_t clients) {
  return std::make_unique<RedlockDeployment>(clients, true);
}

void each(const std::vector<test::LinkProxy*>& links, const std::function<void(test::LinkProxy&)>& action) {
  for (test::LinkProxy* link : links) action(*link);
}

// Every client link of the deployment at once.
void eachLink(Run& run, const std::function<void(test::LinkProxy&)>& action) {
  each(run.deployment<Deployment>().allClientLinks(), action);
}

// A watchdog-renewed hold (of the mode or permits `role` names) through the fault and a little
// past it; `fault` runs with it at a moment of its life drawn from the seed (Run::awaitDrawnMoment).
void withHolder(Run& run, milliseconds faultLength, const std::function<void(const Target&)>& fault,
                std::uint32_t role = 0, bool renewed = false) {
  const auto target = run.holdLong(milliseconds(0), faultLength + run.timing().lease * 4, role);
  if (!target) return;  // the runner retries the cycle
  run.awaitDrawnMoment(*target, renewed);
  fault(*target);
  run.fleet().endHold(target->slot);
}

// A hold with a fixed lease that outlives the fault and its recovery; ended once its key was
// taken or kTakeBudget passed.
void withOutlivingHolder(Run& run, const std::function<void(const Target&)>& fault,
                         milliseconds lease = kOutlivingLease) {
  const auto target = run.holdLong(lease, kOutlivingHold);
  if (!target) return;
  fault(*target);
  run.endHoldAfterTaken(*target, kTakeBudget);
}

// The holder cut off from every server while the others go on: its key expires and is taken.
void partitionHolder(Run& run, std::uint32_t role, const std::string& what, bool renewed = false) {
  withHolder(
      run, run.timing().faultLength,
      [&](const Target& target) {
        const auto links = run.deployment<Deployment>().clientLinks(target.slot);
        run.fault("partition " + target.process + what, run.timing().faultLength,
                  [&] { each(links, [](auto& link) { link.blackhole(); }); },
                  [&] { each(links, [](auto& link) { link.pass(); }); }, &target);
      },
      role, renewed);
}
void partitionClient(Run& run) { partitionHolder(run, 0, ""); }
// Only after a renewal: the watchdog's lease on the server, not the acquire's, is what runs out.
void partitionRenewedClient(Run& run) { partitionHolder(run, 0, "", true); }

// The read-write lock's partitioned holder is a reader in half the cycles, drawn from the seed:
// a writer admitted beside it while its lease is valid is an overlap (SharedChecks.h, check 8).
constexpr std::uint32_t kRequestRead = 1;  // Client.cpp's request field for a read
void partitionReaderOrWriter(Run& run) {
  const bool read = run.pick(2) == 0;
  partitionHolder(run, read ? kRequestRead : 0, read ? " (reader)" : " (writer)");
}

// A watchdog-renewed holder (after a renewal) cut off from the server as it calls unlock: the
// release is sent into the partition and its reply never comes. The library must not report it
// released (a release that returned ok while the server kept the key fails check 11).
void partitionAtRelease(Run& run) {
  withHolder(
      run, run.timing().faultLength,
      [&](const Target& target) {
        const auto links = run.deployment<Deployment>().clientLinks(target.slot);
        run.fault("partition " + target.process + " as it releases", run.timing().faultLength,
                  [&] {
                    each(links, [](auto& link) { link.blackhole(); });
                    run.fleet().endHold(target.slot);
                  },
                  [&] { each(links, [](auto& link) { link.pass(); }); }, &target);
      },
      0, true);
}

// A reader R inside its hold, a second reader U of the key beside it, and R cut off from the
// server as U's section ends and it asks tryUpgrade: the lock must refuse U while R's read lives
// on the server (an upgraded U is judged as a writer beside R, SharedChecks.h, check 8).
constexpr std::uint32_t kRequestUpgrade = 2;  // Client.cpp's: a read that asks tryUpgrade when it ends
void upgradeBesidePartitionedReader(Run& run) {
  const milliseconds length = run.timing().faultLength;
  const auto reader = run.holdLong(milliseconds(0), length + run.timing().lease * 4, kRequestRead);
  if (!reader) return;
  Fleet& fleet = run.fleet();
  const std::size_t upgrader = (reader->slot + 1 + run.pick(fleet.size() - 1)) % fleet.size();
  fleet.requestHold(upgrader, milliseconds(0), length + run.timing().lease * 4, milliseconds(0), kRequestUpgrade);
  if (!fleet.waitHolding(upgrader, run.timing().acquireTimeout * 4)) {
    fleet.endHold(reader->slot);
    run.missed("no second reader got inside beside the first");
    return;
  }
  const auto links = run.deployment<Deployment>().clientLinks(reader->slot);
  run.fault("partition " + reader->process + " (reader) as " + fleet.id(upgrader) + " upgrades", length,
            [&] {
              each(links, [](auto& link) { link.blackhole(); });
              fleet.endHold(upgrader);
            },
            [&] { each(links, [](auto& link) { link.pass(); }); }, &*reader);
  fleet.endHold(reader->slot);
}

// Whether the client in `slot` completed `op` after `sinceNs`, waiting up to `budget`.
bool awaitCompleted(Run& run, std::size_t slot, const std::string& op, std::int64_t sinceNs, milliseconds budget) {
  Fleet& fleet = run.fleet();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const Op& record : fleet.history()) {
      if (record.process == fleet.id(slot) && record.op == op && record.kind == Kind::Ok && record.timeNs > sinceNs) {
        return true;
      }
    }
    run.sleep(milliseconds(10));
  }
  return false;
}

// Semaphore: a client asked for one permit of the first key resizes it to 2 once it released
// (from the 3 it began with; the others' objects go stale, and each builds its Semaphore again at
// the ConfigError of its next acquire); then a holder of every permit, as many as its object
// counts, is cut off from the server for 2.5 leases. Every hold after the shrink is judged
// against a capacity of 2 (SharedChecks.h, check 8).
void shrinkThenPartition(Run& run) {
  Fleet& fleet = run.fleet();
  const std::size_t resizer = run.pick(fleet.size());
  const std::int64_t since = monotonicNs();
  fleet.requestHold(resizer, milliseconds(0), milliseconds(50), milliseconds(0), 1, 2);
  const milliseconds budget = run.timing().acquireTimeout * 4 + run.timing().holdMax * 2;
  if (!fleet.waitHolding(resizer, budget) || !awaitCompleted(run, resizer, "resize", since, budget)) {
    fleet.endHold(resizer);
    return run.missed("the semaphore was not resized");
  }
  partitionClient(run);
}

void latency(Run& run) {
  const milliseconds delay = run.between(run.timing().lease / 2, run.timing().lease * 3 / 4);
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("latency " + std::to_string(delay.count()) + " ms", run.timing().faultLength,
              [&] { eachLink(run, [&](auto& link) { link.delay(delay); }); },
              [&] { eachLink(run, [](auto& link) { link.pass(); }); }, &target);
  });
}

// Connection resets on every client link, every 50-300 ms for `length`.
void resetLinks(Run& run, milliseconds length) {
  const auto end = std::chrono::steady_clock::now() + length;
  while (std::chrono::steady_clock::now() < end) {
    eachLink(run, [](auto& link) { link.resetAll(); });
    run.sleep(run.between(milliseconds(50), milliseconds(300)));
  }
}

void resets(Run& run) {
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("connection resets", run.timing().faultLength,
              [&] { resetLinks(run, run.timing().faultLength); }, [] {}, &target);
  });
}

void pauseClient(Run& run) {
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("SIGSTOP " + target.process, run.timing().faultLength, [&] { run.fleet().pause(target.slot); },
              [&] { run.fleet().resume(target.slot); }, &target);
  });
}

void killClients(Run& run) {
  for (int i = 0; i < 2; ++i) {
    withHolder(run, milliseconds(0), [&](const Target& target) {
      run.fault("SIGKILL " + target.process, milliseconds(0), [&] { run.fleet().kill(target.slot); }, [] {}, &target);
    });
    run.sleep(run.between(milliseconds(300), milliseconds(900)));
  }
}

void restartServer(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("server SIGKILL, restart", run.between(milliseconds(200), run.timing().lease),
              [&] { deployment.server().kill(); }, [&] { deployment.server().restart(); }, &target);
  });
}

// How far a clock fault moves a server's clock: past the lease ahead, an hour back.
std::chrono::seconds jumpAhead(const Run& run) {
  return std::chrono::duration_cast<std::chrono::seconds>(run.timing().lease * 3) + std::chrono::seconds(1);
}
constexpr std::chrono::seconds kStepBack{3600};

std::string signedSeconds(std::chrono::seconds offset) {
  return (offset.count() < 0 ? "" : "+") + std::to_string(offset.count()) + " s";
}

// The server's clock jumps ahead under a holder, and back when the fault heals: the keys expire
// at once.
void clockJump(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  const auto before = deployment.clock().offset();
  const auto jump = before + jumpAhead(run);
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("server clock " + signedSeconds(jump), run.timing().faultLength, [&] { deployment.clock().set(jump); },
              [&] { deployment.clock().set(before); }, &target);
  });
}

// The server's clock steps back an hour under a holder and stays there, as a clock set back by
// hand or by a bad time source would: keys live longer, never shorter, so nobody may take the
// holder's key, and the fence counter keeps tokens rising although the clock floor went back.
void clockBack(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  const auto back = deployment.clock().offset() - kStepBack;
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("server clock " + signedSeconds(back), run.timing().faultLength, [&] { deployment.clock().set(back); },
              [] {}, &target);
  });
}

// Moves a clock between two offsets on a schedule until stopped, then leaves it at the first.
class ClockStrobe {
 public:
  ClockStrobe(std::function<void(std::chrono::seconds)> set, std::chrono::seconds rest, std::chrono::seconds away,
              std::vector<milliseconds> periods)
      : set_(std::move(set)), rest_(rest), away_(away), periods_(std::move(periods)) {}
  ClockStrobe(const ClockStrobe&) = delete;
  ClockStrobe& operator=(const ClockStrobe&) = delete;
  ~ClockStrobe() { stop(); }

  void start() {
    thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      for (std::size_t i = 0; !stopping_; ++i) {
        set_(i % 2 == 0 ? away_ : rest_);
        stopped_.wait_for(lock, periods_.at(i % periods_.size()), [this] { return stopping_; });
      }
    });
  }
  void stop() {
    if (!thread_.joinable()) return;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    stopped_.notify_all();
    thread_.join();
    set_(rest_);
  }

 private:
  std::function<void(std::chrono::seconds)> set_;
  std::chrono::seconds rest_;
  std::chrono::seconds away_;
  std::vector<milliseconds> periods_;
  std::mutex mutex_;
  std::condition_variable stopped_;
  bool stopping_ = false;
  std::thread thread_;
};

// Periods of 100-200 ms, drawn from the seed; the shim sees a change within 50 ms.
std::vector<milliseconds> strobePeriods(Run& run) {
  std::vector<milliseconds> periods;
  for (int i = 0; i < 16; ++i) periods.push_back(run.between(milliseconds(100), milliseconds(200)));
  return periods;
}

// The server's clock strobes past the lease ahead and back every 100-200 ms under a holder: each
// jump ahead expires the keys at once, and tokens must keep rising through every jump back.
void clockStrobe(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  const auto rest = deployment.clock().offset();
  const auto away = rest + jumpAhead(run);
  ClockStrobe strobe([&](std::chrono::seconds offset) { deployment.clock().set(offset); }, rest, away,
                     strobePeriods(run));
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("server clock strobing " + signedSeconds(rest) + " / " + signedSeconds(away), run.timing().faultLength,
              [&] { strobe.start(); }, [&] { strobe.stop(); }, &target);
  });
}

// The server's clock steps back an hour and the server restarts empty under a holder: the fence
// counter is gone and the clock floor is below the tokens already handed out, the one way
// tokens go back (README, "Fencing tokens"). The fenced store refuses the later holders' writes.
void clockBackAndRestart(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  const auto back = deployment.clock().offset() - kStepBack;
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("server clock " + signedSeconds(back) + ", SIGKILL, restart empty",
              run.between(milliseconds(200), run.timing().lease),
              [&] {
                deployment.clock().set(back);
                deployment.server().kill();
              },
              [&] { deployment.server().restart(); }, &target);
  });
}

// The server SIGSTOPped past the lease under a holder: renewals time out, the holder's lease
// ends for it, and the server expires the key when it runs again.
void pauseServer(Run& run) {
  auto& deployment = run.deployment<SingleDeployment>();
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("server SIGSTOP", run.timing().faultLength, [&] { deployment.server().pause(); },
              [&] { deployment.server().resume(); }, &target);
  });
}

// One of the faults under which the lock must keep sections apart, drawn each cycle from the
// seed: over many cycles (--cycles, the long profile) a mixed random schedule.
void mixed(Run& run) {
  const std::vector<void (*)(Run&)> faults = {partitionClient, latency, resets, pauseServer};
  faults.at(run.pick(faults.size()))(run);
}

// The leader SIGKILLed inside its term (at a drawn moment), replaced: its successor leads once
// the term's lease ran out on the server.
void killLeader(Run& run) {
  withHolder(run, milliseconds(0), [&](const Target& target) {
    run.fault("SIGKILL " + target.process, milliseconds(0), [&] { run.fleet().kill(target.slot); }, [] {}, &target);
  });
}

// The leader SIGSTOPped past its lease, resumed only once another client leads a long term the
// nemesis asked for (its hold recorded); the stale leader then resigns inside that term, and a
// resign that hands on whatever key it finds ends the other's term under it.
void staleResign(Run& run) {
  Fleet& fleet = run.fleet();
  std::optional<std::size_t> other;
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault(
        "SIGSTOP " + target.process + " until another leads", run.timing().faultLength,
        [&] { fleet.pause(target.slot); },
        [&] {
          for (std::size_t i = 1; i < fleet.size() && !other; ++i) {
            const std::size_t slot = (target.slot + i) % fleet.size();
            fleet.requestHold(slot, milliseconds(0), run.timing().lease * 4, milliseconds(0), 0);
            if (fleet.waitHolding(slot, run.timing().recoveryBound)) other = slot;
          }
          fleet.resume(target.slot);
        },
        &target);
  });
  run.sleep(run.timing().lease);  // the stale leader's resign comes inside the other's term
  if (other) fleet.endHold(*other);
}

// Leader election: one fault at the leader per cycle, drawn from the seed; a paused server only
// where there is one.
void electMixed(Run& run) {
  const std::vector<void (*)(Run&)> faults = {partitionClient, pauseClient, latency, killLeader, pauseServer};
  faults.at(run.pick(faults.size()))(run);
}
void electMixedReplicated(Run& run) {
  const std::vector<void (*)(Run&)> faults = {partitionClient, pauseClient, latency, killLeader};
  faults.at(run.pick(faults.size()))(run);
}

// Redlock: `count` distinct nodes, drawn from the seed.
std::vector<std::size_t> someNodes(Run& run, std::size_t count) {
  std::vector<std::size_t> nodes;
  while (nodes.size() < count) {
    const std::size_t node = run.pick(RedlockDeployment::kNodes);
    if (std::find(nodes.begin(), nodes.end(), node) == nodes.end()) nodes.push_back(node);
  }
  return nodes;
}

std::string nodeNames(const std::vector<std::size_t>& nodes) {
  std::string names;
  for (std::size_t node : nodes) names += (names.empty() ? "" : ",") + std::to_string(node);
  return names;
}

void partitionTwoOfFive(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 2);
  std::vector<test::LinkProxy*> links;
  for (std::size_t node : nodes) {
    for (test::LinkProxy* link : deployment.nodeLinks(node)) links.push_back(link);
  }
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("partition nodes " + nodeNames(nodes), run.timing().faultLength,
              [&] { each(links, [](auto& link) { link.blackhole(); }); },
              [&] { each(links, [](auto& link) { link.pass(); }); }, &target);
  });
}

// Overlapping majorities: the holder keeps nodes {0,1,2} (drawn), every other client {2,3,4}.
// Each side sees a quorum; only the shared node keeps them apart.
void overlappingMajorities(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto order = someNodes(run, RedlockDeployment::kNodes);
  const std::vector<std::size_t> holderLoses{order[3], order[4]};
  const std::vector<std::size_t> othersLose{order[0], order[1]};
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    std::vector<test::LinkProxy*> links;
    for (std::size_t slot = 0; slot < deployment.clients(); ++slot) {
      const auto mine = deployment.clientLinks(slot);
      for (std::size_t node : slot == target.slot ? holderLoses : othersLose) links.push_back(mine.at(node));
    }
    run.fault("holder without nodes " + nodeNames(holderLoses) + ", others without " + nodeNames(othersLose),
              run.timing().faultLength, [&] { each(links, [](auto& link) { link.blackhole(); }); },
              [&] { each(links, [](auto& link) { link.pass(); }); }, &target);
  });
}

// Two nodes' clocks jump three leases ahead (their copies of the key expire at once) and a third
// restarts empty, under a holder: the others can now make a quorum of three (Kleppmann's case
// against Redlock's timing assumptions).
void clockBumpAndRestart(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 3);
  const auto jump = std::chrono::duration_cast<std::chrono::seconds>(run.timing().lease * 3) + std::chrono::seconds(1);
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("clocks of nodes " + std::to_string(nodes[0]) + "," + std::to_string(nodes[1]) + " +" +
                  std::to_string(jump.count()) + " s, node " + std::to_string(nodes[2]) + " restarted empty",
              run.timing().faultLength,
              [&] {
                deployment.clock(nodes[0]).set(jump);
                deployment.clock(nodes[1]).set(jump);
                deployment.server(nodes[2]).kill();
                deployment.server(nodes[2]).restart();
              },
              [&] {
                deployment.clock(nodes[0]).set(std::chrono::seconds(0));
                deployment.clock(nodes[1]).set(std::chrono::seconds(0));
              }, &target);
  });
}

// Two nodes' clocks strobe three leases ahead and back every 100-200 ms under a holder: their
// copies of the keys expire at each jump ahead. A holder with copies on all five keeps a quorum;
// one that won with a bare three (a competing attempt held the other two at that moment) can
// lose it, and another client makes a quorum with the expired copies: Redlock assumes bounded
// clock drift (seen on seed 11: two cycles, one such overlap, told at the next renewal). Tokens
// keep rising.
void redlockClockStrobe(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 2);
  std::vector<std::unique_ptr<ClockStrobe>> strobes;
  for (std::size_t node : nodes) {
    ServerClock& clock = deployment.clock(node);
    strobes.push_back(std::make_unique<ClockStrobe>([&clock](std::chrono::seconds offset) { clock.set(offset); },
                                                    clock.offset(), clock.offset() + jumpAhead(run),
                                                    strobePeriods(run)));
  }
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("clocks of nodes " + nodeNames(nodes) + " strobing " + signedSeconds(jumpAhead(run)),
              run.timing().faultLength, [&] { for (auto& strobe : strobes) strobe->start(); },
              [&] { for (auto& strobe : strobes) strobe->stop(); }, &target);
  });
}

// Three nodes' clocks an hour back under a holder, for the rest of the run: keys live longer on
// them, never shorter, so nobody may take the holder's key, and tokens keep rising.
void redlockClockBack(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 3);
  withHolder(run, run.timing().faultLength, [&](const Target& target) {
    run.fault("clocks of nodes " + nodeNames(nodes) + " " + signedSeconds(-kStepBack), run.timing().faultLength,
              [&] {
                for (std::size_t node : nodes) deployment.clock(node).set(deployment.clock(node).offset() - kStepBack);
              },
              [] {}, &target);
  });
}

void threeOfFiveDown(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  const auto nodes = someNodes(run, 3);
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("SIGKILL nodes " + nodeNames(nodes) + ", restart", run.timing().faultLength,
              [&] { for (std::size_t node : nodes) deployment.server(node).kill(); },
              [&] { for (std::size_t node : nodes) deployment.server(node).restart(); }, &target);
  });
}

constexpr std::size_t kRedlockQuorum = RedlockDeployment::kNodes / 2 + 1;

// The Redlock nodes holding the holder's copy of `key`: those that share the value a quorum of
// nodes has (a competing attempt's partial copies are on fewer, and are undone).
std::vector<std::size_t> holderNodes(RedlockDeployment& deployment, const std::string& key) {
  const std::string name = detail::KeyNames("dlock:", key, false).lock();
  std::map<std::string, std::vector<std::size_t>> nodesByValue;
  for (std::size_t node = 0; node < RedlockDeployment::kNodes; ++node) {
    test::RedisProcess& server = deployment.server(node);
    test::RedisClient client(server.host(), server.port());
    const test::Reply value = client.command({"GET", name});
    if (value.type == REDIS_REPLY_STRING) nodesByValue[value.str].push_back(node);
  }
  for (const auto& [value, nodes] : nodesByValue) {
    if (nodes.size() >= kRedlockQuorum) return nodes;
  }
  return {};
}

// One node SIGKILLed and restarted empty under a holder, a quorum of the holder's copies left
// without it: one of the holder's nodes when it has more than a bare quorum, else a node without
// its copy. A node of a bare quorum restarted at once lets a second client make a quorum with it:
// Redlock's delayed-restart requirement (backends/redlock/README.md), which no client can meet.
void restartOneWithoutPersistence(Run& run) {
  auto& deployment = run.deployment<RedlockDeployment>();
  withOutlivingHolder(run, [&](const Target& target) {
    const std::vector<std::size_t> holding = holderNodes(deployment, target.key);
    const bool spare = holding.size() > kRedlockQuorum;
    std::vector<std::size_t> candidates;
    for (std::size_t node = 0; node < RedlockDeployment::kNodes; ++node) {
      const bool holds = std::find(holding.begin(), holding.end(), node) != holding.end();
      if (holds == spare) candidates.push_back(node);
    }
    const std::size_t node = candidates.at(run.pick(candidates.size()));
    run.fault("SIGKILL node " + std::to_string(node) + (spare ? ", one of " : ", none of ") +
                  std::to_string(holding.size()) + " holding the key, restart empty",
              milliseconds(100), [&] { deployment.server(node).kill(); },
              [&] { deployment.server(node).restart(); }, &target);
  });
}

Deploy sentinel(std::size_t waitReplicas = 0) {
  return [=](std::size_t clients) {
    SentinelDeployment::Options options;
    options.waitReplicas = waitReplicas;
    return std::make_unique<SentinelDeployment>(clients, options);
  };
}

// How long the sentinels may take to promote a replica once the master is gone: down-after,
// agreement, election and promotion, on a busy machine.
constexpr milliseconds kPromotionBudget{15000};

// The master SIGKILLed under a holder; once the sentinels named another, it comes back as a
// replica; the holder's release goes to the new master.
// The master SIGKILLed under `target`'s hold, a replica promoted, the old master back as a replica.
void sentinelFailoverUnder(Run& run, const Target& target) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  run.fault("master " + std::to_string(old) + " SIGKILL, failover", run.timing().faultLength,
            [&] { deployment.kill(old); },
            [&] {
              (void)deployment.waitForNewMaster(old, kPromotionBudget);
              deployment.restartAsReplica(old);
            }, &target);
}

// A fault during the recovery from another: right after it, connection resets on every client
// link for 1.5 s, under the same hold.
void resetsDuringRecovery(Run& run, const Target& target) {
  run.fault("connection resets during the recovery", milliseconds(0), [&] { resetLinks(run, milliseconds(1500)); },
            [] {}, &target);
}

void sentinelFailover(Run& run) {
  withOutlivingHolder(run, [&](const Target& target) { sentinelFailoverUnder(run, target); });
}

Deploy sentinelWithClocks() {
  return [](std::size_t clients) {
    SentinelDeployment::Options options;
    options.fakeClocks = true;
    return std::make_unique<SentinelDeployment>(clients, options);
  };
}

// Sets the wall clock of every data node but the master `offset` from the master's, and waits
// until each runs on it.
void setReplicaClocks(SentinelDeployment& deployment, std::size_t master, std::chrono::seconds offset) {
  const auto masterOffset = deployment.clock(master).offset();
  for (std::size_t node = 0; node < SentinelDeployment::kDataNodes; ++node) {
    if (node != master) deployment.clock(node).set(masterOffset + offset);
  }
  for (std::size_t node = 0; node < SentinelDeployment::kDataNodes; ++node) {
    if (node != master) deployment.waitClockSeen(node, milliseconds(5000));
  }
}

// The replicas' clocks 15 s ahead of the master's, then the master SIGKILLed under a holder with
// a 10 s lease: the promoted replica expires every key at once (their deadlines came over as
// absolute times, past on its clock), the holder's among them, while the holder's lease is still
// valid for it. Tokens keep rising: the clock floor went ahead. (Far more ahead and a replica
// counts its master link as timed out, and the sentinels will not promote it.)
void sentinelReplicaClockAheadFailover(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  const std::chrono::seconds ahead{15};
  // Ahead before the kill, not with it, and seen by the replicas: one that recorded its link down
  // on the old clock would count the jump as time without a master, and the sentinels would pass
  // it over.
  setReplicaClocks(deployment, old, ahead);
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("replicas' clocks " + signedSeconds(ahead) + ", master " + std::to_string(old) + " SIGKILL, failover",
              run.timing().faultLength, [&] { deployment.kill(old); },
              [&] {
                (void)deployment.waitForNewMaster(old, kPromotionBudget);
                deployment.restartAsReplica(old);
              }, &target);
  }, milliseconds(10000));
}

// Replication held back for 15 s of acquisitions and the replicas' clocks 10 s behind the
// master's, then the master SIGKILLed under a holder: the promoted replica lacks those
// acquisitions, fence counters included, and for 10 s after the kill its clock floor is below
// their tokens, so tokens go back (README, "Fencing tokens": data lost and a clock behind). The
// keys it has from before the window expired on its clock too (window > lease + 10 s); an hour
// behind, they would block their keys for that hour.
void sentinelReplicaClockBackFailover(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  const std::chrono::seconds behind{10};
  setReplicaClocks(deployment, old, -behind);
  deployment.delayReplication(milliseconds(60000));
  run.sleep(milliseconds(15000));
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("replication held back 15 s, replicas' clocks " + signedSeconds(-behind) + ", master " +
                  std::to_string(old) + " SIGKILL, failover",
              run.timing().faultLength, [&] { deployment.kill(old); },
              [&] {
                (void)deployment.waitForNewMaster(old, kPromotionBudget);
                deployment.passReplication();
                deployment.restartAsReplica(old);
              }, &target);
  });
  deployment.passReplication();
}

// Replication held back (by `delay`) while a client acquires, then the master SIGKILLed under
// that holder: what the master acknowledged in the window may be on no replica when one is
// promoted. With wait_replicas the delay is under wait_timeout, so acquisitions go through and
// are on a replica.
std::function<void(Run&)> sentinelFailoverDelayedReplication(milliseconds delay) {
  return [delay](Run& run) {
    auto& deployment = run.deployment<SentinelDeployment>();
    const std::size_t old = deployment.master();
    deployment.delayReplication(delay);
    withOutlivingHolder(run, [&](const Target& target) {
      run.fault("replication +" + std::to_string(delay.count()) + " ms, master " + std::to_string(old) +
                    " SIGKILL, failover",
                run.timing().faultLength, [&] { deployment.kill(old); },
                [&] {
                  (void)deployment.waitForNewMaster(old, kPromotionBudget);
                  deployment.passReplication();
                  deployment.restartAsReplica(old);
                }, &target);
    });
    deployment.passReplication();
  };
}

// The master SIGSTOPped past down-after under a holder: the sentinels promote a replica; resumed,
// the old master answers as master until the sentinels demote it.
void sentinelPauseMaster(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("master " + std::to_string(old) + " SIGSTOP", run.timing().faultLength,
              [&] { deployment.pause(old); },
              [&] {
                // A master that comes back before the sentinels agreed is a fault too: resume it
                // either way, and let the checks judge what the clients saw.
                try {
                  (void)deployment.waitForNewMaster(old, kPromotionBudget);
                } catch (const std::exception& error) {
                  std::printf("[nemesis] %s; resuming the old master\n", error.what());
                }
                deployment.resume(old);
              }, &target);
  });
}

// Two failovers under one holder: the master killed and a replica promoted, then, the old master
// back as a replica, the new one killed too. The hold outlives both, so its release reaches the
// third master over connections both faults broke.
void sentinelRepeatedFailover(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t first = deployment.master();
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("master " + std::to_string(first) + " SIGKILL, failover, then the new master SIGKILL, failover",
              run.timing().faultLength, [&] { deployment.kill(first); },
              [&] {
                const std::size_t second = deployment.waitForNewMaster(first, kPromotionBudget);
                deployment.restartAsReplica(first);
                // The second failover from a settled set: every sentinel names the new master,
                // which streams to both replicas, the restarted one among them.
                deployment.waitHealthy(kPromotionBudget);
                deployment.kill(second);
                (void)deployment.waitForNewMaster(second, kPromotionBudget);
                deployment.restartAsReplica(second);
              }, &target);
  });
}

// A fault during the recovery from another: a failover, then, while the clients find the new
// master, connection resets on every client link for 1.5 s, under the same holder.
void sentinelFailoverThenResets(Run& run) {
  withOutlivingHolder(run, [&](const Target& target) {
    sentinelFailoverUnder(run, target);
    resetsDuringRecovery(run, target);
  });
}

// The master cut off from clients, sentinels and replicas past down-after under a holder: the
// sentinels promote a replica; on heal the old master is demoted.
void sentinelPartitionMaster(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  const auto links = deployment.linksTo(old);
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("master " + std::to_string(old) + " partitioned", run.timing().faultLength + milliseconds(1500),
              [&] { each(links, [](auto& link) { link.blackhole(); }); },
              [&] {
                (void)deployment.waitForNewMaster(old, kPromotionBudget);  // the partition did what it is for
                each(links, [](auto& link) { link.pass(); });
              }, &target);
  });
}

// Split brain: under a watchdog-renewed hold, the holder and the master on one side, the sentinels,
// the replicas and the other clients on the other. The sentinels promote a replica and the other
// clients follow them there, while the holder, hearing nothing of it, renews on the old master. The fault waits for the
// promotion and for another client to take the key on the new master (or says it did not come).
// With wait_replicas no replica acknowledges the holder's renewals on the old master, so its lease
// must end at its own deadline, before the promoted replica's copy of the key expires.
void sentinelSplitBrain(Run& run) {
  auto& deployment = run.deployment<SentinelDeployment>();
  const std::size_t old = deployment.master();
  const auto target = run.holdLong(milliseconds(0), kOutlivingHold);
  if (!target) return;
  // Two sides: the holder with the old master; the sentinels, the replicas and the other clients.
  test::LinkProxy* kept = &deployment.clientDataLink(target->slot, old);
  std::vector<test::LinkProxy*> cut;
  for (test::LinkProxy* link : deployment.linksTo(old)) {
    if (link != kept) cut.push_back(link);
  }
  for (test::LinkProxy* link : deployment.clientLinks(target->slot)) {
    if (link != kept) cut.push_back(link);
  }
  const std::int64_t since = monotonicNs();
  run.fault("split brain: master " + std::to_string(old) + " kept by " + target->process + " alone", milliseconds(0),
            [&] { each(cut, [](auto& link) { link.blackhole(); }); },
            [&] {
              (void)deployment.waitForNewMaster(old, kPromotionBudget);
              if (!run.waitTaken(*target, since, kPromotionBudget)) {
                std::printf("[nemesis] split brain: no other client took the key on the new master\n");
              }
              each(cut, [](auto& link) { link.pass(); });
            }, &*target);
  run.fleet().endHold(target->slot);
}

std::unique_ptr<Deployment> cluster(std::size_t clients) { return std::make_unique<ClusterDeployment>(clients); }

// The runner's first lock key (Nemesis.cpp names them nemesis-0, nemesis-1, ...).
constexpr const char* kFirstKey = "nemesis-0";

// The master serving the first key SIGKILLed; its replica takes over; the old master comes back.
// The first key's master SIGKILLed under `target`'s hold, its replica promoted, the old master
// back as a replica.
void clusterFailoverUnder(Run& run, const Target& target) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t old = deployment.ownerOf(slot);
  run.fault("master " + std::to_string(old) + " SIGKILL, failover", run.timing().faultLength,
            [&] { deployment.kill(old); },
            [&] {
              (void)deployment.waitForNewOwner(slot, old, kPromotionBudget);
              deployment.restart(old);
            }, &target);
}

void clusterFailover(Run& run) {
  withOutlivingHolder(run, [&](const Target& target) { clusterFailoverUnder(run, target); });
}

// The first key's slot moved to another master while clients use it.
void clusterMigrateSlot(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t source = deployment.ownerOf(slot);
  std::vector<std::size_t> targets;
  for (std::size_t master : deployment.masters()) {
    if (master != source) targets.push_back(master);
  }
  const std::size_t to = targets.at(run.pick(targets.size()));
  const milliseconds pause = run.between(milliseconds(300), milliseconds(800));
  // The key's holder renews and releases across the move (ASK, then MOVED).
  withHolder(run, pause * 4, [&](const Target& target) {
    run.fault("slot " + std::to_string(slot) + " migrated " + std::to_string(source) + " -> " + std::to_string(to),
              milliseconds(0), [&] { deployment.migrateSlot(slot, to, pause); }, [] {}, &target);
  });
}

// The first key's master cut off from clients and the bus past cluster-node-timeout: its replica
// takes over; healed, the old master rejoins as a replica.
void clusterPartitionMaster(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t old = deployment.ownerOf(slot);
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("master " + std::to_string(old) + " partitioned", run.timing().faultLength + milliseconds(1500),
              [&] { deployment.isolate(old); },
              [&] {
                (void)deployment.waitForNewOwner(slot, old, kPromotionBudget);  // the partition did what it is for
                deployment.rejoin(old);
              }, &target);
  });
}

// Two failovers of the first key's slot under one holder: its master killed and the replica
// promoted, the old master back and synced as the new one's replica, then the new master killed
// and the old one promoted again.
void clusterRepeatedFailover(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t first = deployment.ownerOf(slot);
  withOutlivingHolder(run, [&](const Target& target) {
    run.fault("master " + std::to_string(first) + " SIGKILL, failover, then the new master SIGKILL, failover",
              run.timing().faultLength, [&] { deployment.kill(first); },
              [&] {
                const std::size_t second = deployment.waitForNewOwner(slot, first, kPromotionBudget);
                deployment.restart(first);
                deployment.waitSyncedReplica(first, kPromotionBudget);
                deployment.kill(second);
                (void)deployment.waitForNewOwner(slot, second, kPromotionBudget);
                deployment.restart(second);
              }, &target);
  });
}

// A fault during the recovery from another: the first key's master killed and its replica
// promoted, then, while the clients follow the new owner, connection resets on every client link.
void clusterFailoverThenResets(Run& run) {
  withOutlivingHolder(run, [&](const Target& target) {
    clusterFailoverUnder(run, target);
    resetsDuringRecovery(run, target);
  });
}

// Split brain: under a watchdog-renewed hold of the first key, the holder and that key's master on
// one side, every other node and client on the other. The majority promotes the master's replica
// and the other clients follow it, while the holder renews on the old master until it stops taking
// writes (a master in a minority does after cluster-node-timeout). The fault waits for the
// promotion and for another client to take the key there (or says it did not come).
void clusterSplitBrain(Run& run) {
  auto& deployment = run.deployment<ClusterDeployment>();
  const std::uint16_t slot = deployment.slotOfLock(kFirstKey);
  const std::size_t old = deployment.ownerOf(slot);
  const auto target = run.holdLong(milliseconds(0), kOutlivingHold);
  if (!target) return;
  const auto holderLinks = deployment.clientLinks(target->slot);
  test::LinkProxy& kept = deployment.ownLink(target->slot, old);
  const std::int64_t since = monotonicNs();
  run.fault("split brain: master " + std::to_string(old) + " kept by " + target->process + " alone", milliseconds(0),
            [&] {
              deployment.isolate(old);
              for (test::LinkProxy* link : holderLinks) {
                if (link != &kept) link->blackhole();
              }
              kept.pass();
            },
            [&] {
              (void)deployment.waitForNewOwner(slot, old, kPromotionBudget);
              if (!run.waitTaken(*target, since, kPromotionBudget)) {
                std::printf("[nemesis] split brain: no other client took the key on the new master\n");
              }
              deployment.rejoin(old);
              each(holderLinks, [](auto& link) { link.pass(); });
            }, &*target);
  run.fleet().endHold(target->slot);
}

// What each fault means to do to its holder (FaultHits.h).
using Taken = FaultExpectation::Taken;
// A mixed schedule on Sentinel: each cycle one of failover, partition, pause, two failovers in a
// row, or a failover with resets during the recovery, drawn from the seed (many with --cycles).
void sentinelMixed(Run& run) {
  const std::vector<void (*)(Run&)> faults = {sentinelFailover, sentinelPartitionMaster, sentinelPauseMaster,
                                              sentinelRepeatedFailover, sentinelFailoverThenResets};
  faults.at(run.pick(faults.size()))(run);
}

// The same on a cluster: failover, partition, slot migration, two failovers in a row, or a
// failover with resets during the recovery.
void clusterMixed(Run& run) {
  const std::vector<void (*)(Run&)> faults = {clusterFailover, clusterPartitionMaster, clusterMigrateSlot,
                                              clusterRepeatedFailover, clusterFailoverThenResets};
  faults.at(run.pick(faults.size()))(run);
}

const FaultExpectation kTaken{true, false, Taken::yes};        // the holder's key taken during its hold
const FaultExpectation kHit{true, false, Taken::either};       // a holder hit, taken or not
const FaultExpectation kKept{true, false, Taken::no};          // a holder hit, its key never taken
const FaultExpectation kOutlived{true, true, Taken::either};   // the hold outlives the recovery
const FaultExpectation kOutlivedTaken{true, true, Taken::yes};
const FaultExpectation kOutlivedKept{true, true, Taken::no};

}  // namespace

// `base`'s faults on clients that wait with acquireAsync: faults on pending acquires and on their
// holders, with cancels of pending ones besides.
std::vector<Scenario> asyncOf(const std::vector<Scenario>& all, const std::vector<std::string>& names) {
  std::vector<Scenario> async;
  for (const std::string& name : names) {
    const auto base = std::find_if(all.begin(), all.end(),
                                   [&](const Scenario& s) { return s.topology == "single" && s.name == name; });
    if (base == all.end()) throw std::logic_error("no single scenario " + name);
    Scenario scenario = *base;
    scenario.name = "async-" + name;
    scenario.summary = "async waiters (acquireAsync, a quarter cancelled): " + scenario.summary;
    scenario.async = true;
    async.push_back(std::move(scenario));
  }
  return async;
}

const std::vector<Scenario>& scenarios() {
  static const std::vector<Scenario> all = [] {
    std::vector<Scenario> list = {
      {"single", "partition", "a holder cut off from the server for 2.5 leases", "", kTaken, single(), partitionClient},
      {"single", "partition-renewed",
       "a holder cut off from the server for 2.5 leases after one or three renewals, or during its second", "", kTaken,
       single(), partitionRenewedClient},
      {"single", "partition-release",
       "a holder cut off from the server as it calls unlock, after one or three renewals, for 2.5 leases", "", kHit,
       single(), partitionAtRelease},
      {"single", "latency", "0.5-0.75 lease of latency on every client link under a holder", "", kHit, single(), latency},
      {"single", "resets", "connection resets every 50-300 ms under a holder", "", kHit, single(), resets},
      {"single", "pause-client", "a holder SIGSTOPped for 2.5 leases", kPauseExplained, kTaken, single(), pauseClient},
      {"single", "kill-client", "two holders SIGKILLed inside their sections, replaced", "", kTaken, single(), killClients},
      {"single", "restart-fsync-always", "server SIGKILLed and restarted under a holder, appendfsync always", "",
       kOutlivedKept, single(Persistence::appendAlways), restartServer},
      {"single", "restart-fsync-everysec", "server SIGKILLed and restarted under a holder, appendfsync everysec",
       kLostWritesExplained, kOutlived, single(Persistence::appendEverySecond), restartServer},
      {"single", "restart-no-persistence", "server SIGKILLed and restarted empty under a holder", kLostWritesExplained,
       kOutlivedTaken, single(), restartServer},
      {"single", "clock-jump", "the server's wall clock jumps 3 leases ahead under a holder", kClockExplained, kTaken,
       single(Persistence::none, true), clockJump},
      {"single", "clock-back", "the server's wall clock steps an hour back under a holder and stays there", "", kKept,
       single(Persistence::none, true), clockBack},
      {"single", "clock-strobe",
       "the server's wall clock strobes 3 leases ahead and back every 100-200 ms under a holder", kClockExplained,
       kHit, single(Persistence::none, true), clockStrobe},
      {"single", "clock-back-restart", "the server's clock an hour back and the server restarted empty under a holder",
       kLostWritesExplained, kOutlivedTaken, single(Persistence::none, true), clockBackAndRestart, false,
       kClockBackAndLostWritesExplained},
      {"single", "pause-server", "the server SIGSTOPped for 2.5 leases under a holder", "", kHit, single(), pauseServer},
      {"single", "mixed", "each cycle one of partition, latency, resets, pause-server, drawn from the seed", "", kHit,
       single(), mixed},
      {"single", "fair-partition", "fair lock: a holder cut off from the server for 2.5 leases", "", kTaken, single(),
       partitionClient, true},
      {"single", "fair-kill-client", "fair lock: two holders SIGKILLed inside their sections, replaced", "", kTaken,
       single(), killClients, true},
      {"single", "fair-resets", "fair lock: connection resets every 50-300 ms under a holder", "", kHit, single(), resets,
       true},
      {"single", "waiter-pause", "a waiter SIGSTOPped as the holder releases; the next waiter holds the key when it resumes",
       "", kHit, single(), [](Run& run) { waiterAroundHandOff(run, WaiterFault::pause, WaitQueue::releaseChannel); }},
      {"single", "fair-waiter-pause",
       "fair lock: the head waiter SIGSTOPped as the holder releases (the key handed to it), the claim runs out, the "
       "next waiter holds the key when it resumes",
       "", kHit, single(), [](Run& run) { waiterAroundHandOff(run, WaiterFault::pause, WaitQueue::fair); }, true},
      {"single", "fair-waiter-mixed",
       "fair lock: the head waiter SIGSTOPped, cut off or SIGKILLed as the holder releases, drawn from the seed", "",
       kHit, single(), [](Run& run) { waiterMixed(run, WaitQueue::fair); }, true},
      {"single", "cancel-partition",
       "a waiter cut off from the server as the holder releases, its acquire cancelled 0-100 ms (drawn) after its next "
       "try went into the cut; the try reaches the server when the link heals",
       "", kHit, single(), [](Run& run) { cancellerCutOff(run, WaitQueue::releaseChannel); }},
      {"single", "fair-cancel-partition",
       "fair lock: the head waiter cut off from the server as the holder releases (the key handed to it), its acquire "
       "cancelled 0-100 ms (drawn) after its next call went into the cut; the call reaches the server when the link "
       "heals",
       "", kHit, single(), [](Run& run) { cancellerCutOff(run, WaitQueue::fair); }, true},
      {"single", "stale-release",
       "a holder SIGSTOPped past its lease; another takes the key for 1.5 s while a third keeps asking for it; with "
       "~250 ms of it left the stale holder releases",
       "", kTaken, single(), [](Run& run) { staleReleaseNearExpiry(run, WaitQueue::releaseChannel); }},
      {"single", "rw-partition",
       "read-write lock: a reader or a writer (drawn) cut off from the server for 2.5 leases", "", kTaken, single(),
       partitionReaderOrWriter, false, "", "rw"},
      {"single", "rw-upgrade-partition",
       "read-write lock: a reader cut off from the server for 2.5 leases as a second reader beside it asks tryUpgrade",
       "", kTaken, single(), upgradeBesidePartitionedReader, false, "", "rw"},
      {"single", "rw-downgrade-partition",
       "read-write lock: a writer downgrades with another writer waiting and is cut off from the server for 2.5 leases "
       "as the downgrade returns", "", kHit, single(), downgradeBesideWaiter, false, "", "rw"},
      {"single", "rw-waiter-mixed",
       "read-write lock: the head waiting writer SIGSTOPped, cut off or SIGKILLed as the writer releases, drawn from "
       "the seed", "", kHit, single(), [](Run& run) { waiterMixed(run, WaitQueue::readWrite); }, false, "", "rw"},
      {"single", "rw-stale-release",
       "read-write lock: a writer SIGSTOPped past its lease; another takes the write for 1.5 s while a third keeps "
       "asking for it; with ~250 ms of it left the stale writer releases",
       "", kTaken, single(), [](Run& run) { staleReleaseNearExpiry(run, WaitQueue::readWrite); }, false, "", "rw"},
      {"single", "sem-partition", "semaphore: a holder of every permit cut off from the server for 2.5 leases", "",
       kTaken, single(), partitionClient, false, "", "sem"},
      {"single", "sem-shrink-partition",
       "semaphore: shrunk from 3 permits to 2 by a client, then a holder of every permit cut off from the server for "
       "2.5 leases", "", kTaken, single(), shrinkThenPartition, false, "", "sem"},
      {"single", "cond-waiter-mixed",
       "bounded buffer (conditions): a consumer awaiting notEmpty SIGSTOPped, cut off or SIGKILLed, drawn from the "
       "seed, while a producer outlives its fixed lease and another puts and signals; the stale producer signals last",
       "", kHit, single(), awaiterMixed, false, "", "cond"},
      {"single", "cond-pause-server",
       "bounded buffer (conditions): the server SIGSTOPped for 2.5 leases as a producer holding the first key awaits "
       "notFull; the await runs when the server resumes, after the call gave up",
       "", kHit, single(), awaitInServerPause, false, "", "cond", true},
      {"single", "sem-waiter-mixed",
       "semaphore: the head waiter SIGSTOPped, cut off or SIGKILLed as the holder of every permit releases, drawn from "
       "the seed", "", kHit, single(), [](Run& run) { waiterMixed(run, WaitQueue::semaphore); }, false, "", "sem"},
      {"single", "sem-stale-release",
       "semaphore: a holder of every permit SIGSTOPped past its lease; another takes them for 1.5 s while a third "
       "keeps asking for them; with ~250 ms left the stale holder releases",
       "", kTaken, single(), [](Run& run) { staleReleaseNearExpiry(run, WaitQueue::semaphore); }, false, "", "sem"},
      {"single", "elect-partition", "election: the leader cut off from the server for 2.5 leases", "", kTaken,
       single(), partitionClient, false, "", "elect"},
      {"single", "elect-pause-client", "election: the leader SIGSTOPped for 2.5 leases", "", kTaken, single(),
       pauseClient, false, "", "elect"},
      {"single", "elect-stale-resign",
       "election: the leader SIGSTOPped past its lease, resumed once another client leads a long term, then resigns",
       "", kTaken, single(), staleResign, false, "", "elect"},
      {"single", "elect-latency", "election: 0.5-0.75 lease of latency on every client link under a leader", "", kHit,
       single(), latency, false, "", "elect"},
      {"single", "elect-mixed",
       "election: each cycle one of partition, pause, latency, SIGKILL of the leader, or the server SIGSTOPped, "
       "drawn from the seed", "", kHit, single(), electMixed, false, "", "elect"},
      {"redlock", "overlapping-majorities", "the holder keeps nodes {a,b,c}, every other client {c,d,e}, for 2.5 leases",
       "", kKept, redlock, overlappingMajorities},
      {"redlock", "clock-bump-restart", "two nodes' clocks 3 leases ahead and a third restarted empty, under a holder",
       kClockAndLostWritesExplained, kHit, redlockWithClocks, clockBumpAndRestart},
      {"redlock", "clock-strobe", "two nodes' clocks strobe 3 leases ahead and back every 100-200 ms under a holder",
       kMinorityClocksExplained, kHit, redlockWithClocks, redlockClockStrobe},
      {"redlock", "clock-back", "three nodes' clocks step an hour back under a holder and stay there", "", kKept,
       redlockWithClocks, redlockClockBack},
      {"redlock", "partition-2-of-5", "two of five nodes partitioned for 2.5 leases under a holder", "", kKept, redlock,
       partitionTwoOfFive},
      {"redlock", "down-3-of-5", "three of five nodes SIGKILLed, restarted empty, under a holder", kLostWritesExplained,
       kOutlived, redlock, threeOfFiveDown},
      {"redlock", "restart-1-no-persistence",
       "one node SIGKILLed and restarted empty at once under a holder, a quorum of its copies left", "",
       kOutlivedKept, redlock, restartOneWithoutPersistence},
      {"redlock", "partition-client", "a holder cut off from every node for 2.5 leases", "", kTaken, redlock,
       partitionClient},
      {"redlock", "pause-client", "a holder SIGSTOPped for 2.5 leases", kPauseExplained, kTaken, redlock, pauseClient},
      {"sentinel", "failover", "the master SIGKILLed under a holder, a replica promoted, the old master back as a replica",
       kFailoverExplained, kOutlived, sentinel(), sentinelFailover},
      {"sentinel", "failover-delayed-replication", "replication held back 30 s, a holder, then the master SIGKILLed",
       kFailoverExplained, kOutlived, sentinel(), sentinelFailoverDelayedReplication(milliseconds(30000))},
      {"sentinel", "failover-delayed-replication-wait",
       "replication delayed 40 ms (under wait_timeout), clients with wait_replicas=1, a holder, then the master SIGKILLed",
       "", kOutlivedKept, sentinel(1), sentinelFailoverDelayedReplication(milliseconds(40))},
      {"sentinel", "partition-master", "the master cut off from everyone for 4 s under a holder, then healed",
       kFailoverExplained, kOutlived, sentinel(), sentinelPartitionMaster},
      {"sentinel", "split-brain-wait",
       "clients with wait_replicas=1; split brain: a holder alone with the master, the others with the sentinels, "
       "which promote a replica",
       "", kHit, sentinel(1), sentinelSplitBrain},
      {"sentinel", "replica-clock-ahead-failover",
       "the replicas' clocks 15 s ahead of the master's, then the master SIGKILLed under a holder (10 s lease)",
       kReplicaClockAheadExplained, kOutlivedTaken, sentinelWithClocks(), sentinelReplicaClockAheadFailover},
      {"sentinel", "replica-clock-back-failover",
       "replication held back for 15 s and the replicas' clocks 10 s behind, then the master SIGKILLed under a holder",
       kFailoverExplained, kOutlived, sentinelWithClocks(), sentinelReplicaClockBackFailover, false,
       kReplicaClockBackExplained},
      {"sentinel", "pause-master", "the master SIGSTOPped past down-after under a holder, a replica promoted, then resumed",
       kFailoverExplained, kOutlived, sentinel(), sentinelPauseMaster},
      {"sentinel", "repeated-failover", "two failovers in a row under one holder, the old master back between them",
       kFailoverExplained, kOutlived, sentinel(), sentinelRepeatedFailover},
      {"sentinel", "mixed", "each cycle one of failover, partition-master, pause-master, repeated-failover, or a "
       "failover with connection resets during the recovery, drawn from the seed", kFailoverExplained, kHit, sentinel(),
       sentinelMixed},
      {"sentinel", "fair-failover", "fair lock: the master SIGKILLed under a holder, a replica promoted, the old master back",
       kFailoverExplained, kOutlived, sentinel(), sentinelFailover, true},
      {"sentinel", "rw-partition",
       "read-write lock: a reader or a writer (drawn) cut off from every server for 2.5 leases", "", kTaken,
       sentinel(), partitionReaderOrWriter, false, "", "rw"},
      {"sentinel", "sem-partition", "semaphore: a holder of every permit cut off from every server for 2.5 leases", "",
       kTaken, sentinel(), partitionClient, false, "", "sem"},
      {"sentinel", "cond-waiter-mixed",
       "bounded buffer (conditions): a consumer awaiting notEmpty SIGSTOPped, cut off or SIGKILLed, drawn from the "
       "seed, while a producer outlives its fixed lease and another puts and signals; the stale producer signals last",
       "", kHit, sentinel(), awaiterMixed, false, "", "cond"},
      {"sentinel", "elect-mixed",
       "election: each cycle one of partition, pause, latency or SIGKILL of the leader, drawn from the seed", "", kHit,
       sentinel(), electMixedReplicated, false, "", "elect"},
      {"cluster", "failover", "the first key's master SIGKILLed under a holder, its replica promoted, the old master back",
       kFailoverExplained, kOutlived, cluster, clusterFailover},
      {"cluster", "migrate-slot", "the first key's slot migrated live to another master under its holder", "", kKept,
       cluster, clusterMigrateSlot},
      {"cluster", "partition-master", "the first key's master cut off (clients and bus) for 4 s under a holder, then healed",
       kFailoverExplained, kOutlived, cluster, clusterPartitionMaster},
      {"cluster", "split-brain", "split brain: a holder alone with the first key's master, the other clients with "
       "the rest of the cluster, which promotes its replica", kFailoverExplained, kHit, cluster, clusterSplitBrain},
      {"cluster", "repeated-failover", "two failovers of the first key's slot in a row under one holder",
       kFailoverExplained, kOutlived, cluster, clusterRepeatedFailover},
      {"cluster", "mixed", "each cycle one of failover, partition-master, migrate-slot, repeated-failover, or a "
       "failover with connection resets during the recovery, drawn from the seed", kFailoverExplained, kHit, cluster,
       clusterMixed},
      {"cluster", "fair-partition-master", "fair lock: the first key's master cut off for 4 s under a holder, then healed",
       kFailoverExplained, kOutlived, cluster, clusterPartitionMaster, true},
      {"cluster", "rw-partition",
       "read-write lock: a reader or a writer (drawn) cut off from every node for 2.5 leases", "", kTaken, cluster,
       partitionReaderOrWriter, false, "", "rw"},
      {"cluster", "sem-partition", "semaphore: a holder of every permit cut off from every node for 2.5 leases", "",
       kTaken, cluster, partitionClient, false, "", "sem"},
      {"cluster", "cond-fair-waiter-mixed",
       "bounded buffer (conditions on the fair lock): a consumer awaiting notEmpty SIGSTOPped, cut off or SIGKILLed, "
       "drawn from the seed, while a producer outlives its fixed lease and another puts and signals; the stale "
       "producer signals last",
       "", kHit, cluster, awaiterMixed, true, "", "cond"},
      {"cluster", "elect-mixed",
       "election: each cycle one of partition, pause, latency or SIGKILL of the leader, drawn from the seed", "", kHit,
       cluster, electMixedReplicated, false, "", "elect"},
    };
    const std::vector<Scenario> async =
        asyncOf(list, {"partition", "kill-client", "pause-server", "fair-partition", "fair-kill-client",
                       "fair-waiter-pause", "fair-waiter-mixed"});
    list.insert(list.end(), async.begin(), async.end());
    return list;
  }();
  return all;
}

}  // namespace dlock::nemesis
