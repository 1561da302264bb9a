// SPDX-License-Identifier: Apache-2.0
// dlock_nemesis — runs fault-test scenarios: for each, deploys its topology with a LinkProxy on
// every link and a fault-free store, starts the workload (dlock_nemesis_client processes), lets
// the nemesis inject its faults on a schedule drawn from the seed (each aimed at a client it
// asked for a long hold), heals, waits until every live client acquired again (at most the
// recovery bound), stops the clients, and checks the run (Checker.h). Every run prints its seed.
//
//   dlock_nemesis [--scenario NAME|all] [--topology T|all] [--seed S] [--cycles N] [--retries R]
//                 [--clients N] [--keys N] [--hold-max-ms M] [--out DIR] [--table FILE]
//                 [--client PATH] [--broken VARIANT] [--list] [--help]
//
// --cycles repeats the nemesis (each cycle: fault, then the recovery) in one run; the short
// profile is 1, scripts/nemesis --long raises it, with shorter holds (--hold-max-ms) and more keys
// for more acquisitions per second. A cycle whose fault did not hit a holder as the scenario means
// (FaultHits.h) is run again, up to --retries (2) more times; a run without one fails check 9.
// --broken runs every client with `dlock_nemesis_client --broken VARIANT` (BrokenOperator.h).
// Writes DIR/<topology>-<scenario>/ with every history, report.json and timeline.svg; appends
// each run's row to --table. Exit 0 when every run passed, 1 when a run failed a check, 2 on bad
// arguments or a run that could not be set up.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dlock/IConditionOperator.h>
#include <dlock/ISemaphoreOperator.h>
#include <dlock/dlock.h>

#include "Checker.h"
#include "FencedStore.h"
#include "Fleet.h"
#include "History.h"
#include "KeyScan.h"
#include "Scenario.h"
#include "ServerObserver.h"
#include "StrandWatch.h"
#include "Timeline.h"

namespace {

using namespace dlock::nemesis;
using std::chrono::milliseconds;

struct Arguments {
  std::string scenario = "all";
  std::string topology = "all";
  std::uint64_t seed = 0;
  bool seedGiven = false;
  int cycles = 1;
  std::size_t clients = 5;
  std::size_t keys = 3;
  std::chrono::milliseconds holdMax{0};  // 0: the Timing's
  std::string out = "nemesis-out";
  std::string table;
  std::string client;
  std::string broken;
  int retries = 2;
  bool list = false;
  bool help = false;
};

constexpr const char* kUsage =
    "usage: dlock_nemesis [--scenario NAME|all] [--topology single|redlock|sentinel|cluster|all] [--seed S]\n"
    "                     [--cycles N] [--retries R] [--clients N] [--keys N] [--hold-max-ms M] [--out DIR]\n"
    "                     [--table FILE] [--client PATH] [--broken VARIANT] [--list] [--help]\n"
    "Runs the fault-test scenarios (--list) and checks each run; see tests/nemesis/README.md.\n";

Arguments parse(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--list" || name == "--help") {
      (name == "--list" ? args.list : args.help) = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(name + " needs a value");
    const std::string value = argv[++i];
    if (name == "--scenario") {
      args.scenario = value;
    } else if (name == "--topology") {
      args.topology = value;
    } else if (name == "--seed") {
      args.seed = std::stoull(value);
      args.seedGiven = true;
    } else if (name == "--cycles") {
      args.cycles = std::stoi(value);
    } else if (name == "--clients") {
      args.clients = std::stoul(value);
    } else if (name == "--hold-max-ms") {
      args.holdMax = std::chrono::milliseconds(std::stoll(value));
    } else if (name == "--keys") {
      args.keys = std::stoul(value);
    } else if (name == "--out") {
      args.out = value;
    } else if (name == "--table") {
      args.table = value;
    } else if (name == "--client") {
      args.client = value;
    } else if (name == "--broken") {
      args.broken = value;
    } else if (name == "--retries") {
      args.retries = std::stoi(value);
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  if (args.cycles < 1 || args.clients < 1 || args.keys < 1 || args.retries < 0) throw std::invalid_argument("counts must be positive");
  return args;
}

// dlock_nemesis_client beside this executable, unless named.
std::string clientExecutable(const Arguments& args, const char* self) {
  if (!args.client.empty()) return args.client;
  return (std::filesystem::path(self).parent_path() / "dlock_nemesis_client").string();
}

// The keys a lock server holds without a TTL, gathered from samples during the run (check 6):
// a server that is down or failing over is skipped until the next sample.
class TtlSampler {
 public:
  explicit TtlSampler(Deployment& deployment, std::string pattern) : deployment_(deployment), pattern_(std::move(pattern)) {}

  void sample() {
    for (const auto& server : deployment_.dataAddresses()) {
      try {
        for (auto& key : keysWithoutTtl(server, pattern_, milliseconds(500))) found_.insert(std::move(key));
      } catch (const std::exception&) {
      }
    }
    ++samples_;
  }
  [[nodiscard]] std::vector<std::string> found() const { return {found_.begin(), found_.end()}; }
  [[nodiscard]] int samples() const { return samples_; }

 private:
  Deployment& deployment_;
  std::string pattern_;
  std::set<std::string> found_;
  int samples_ = 0;
};

ClientSettings settingsFor(const Arguments& args, const char* self, const Timing& timing, Deployment& deployment,
                           const std::vector<std::string>& keys, const std::string& dir, const Scenario& scenario) {
  ClientSettings settings;
  settings.executable = clientExecutable(args, self);
  settings.lockUri = [&deployment](std::size_t slot) { return deployment.lockUri(slot); };
  settings.store = deployment.store().host() + ":" + std::to_string(deployment.store().port());
  settings.keys = keys;
  settings.lease = timing.lease;
  settings.acquireTimeout = timing.acquireTimeout;
  // Holds from a few ms to beyond the renewal period; the nemesis asks for longer ones.
  settings.hold = timing.holdMin;
  settings.extraArguments = {"--hold-max-ms", std::to_string(timing.holdMax.count())};
  if (!args.broken.empty()) settings.extraArguments.insert(settings.extraArguments.end(), {"--broken", args.broken});
  if (scenario.fair) settings.extraArguments.insert(settings.extraArguments.end(), {"--fair", "1"});
  if (scenario.async) settings.extraArguments.insert(settings.extraArguments.end(), {"--async", "1"});
  if (scenario.primitive != "lock") {
    const std::uint32_t capacity = scenario.primitive == "cond" ? kBufferCapacity : kSemaphoreCapacity;
    settings.extraArguments.insert(settings.extraArguments.end(),
                                   {"--primitive", scenario.primitive, "--capacity", std::to_string(capacity)});
  }
  settings.historyDirectory = dir;
  settings.seed = args.seed;
  return settings;
}

// The permits a semaphore's server still counts in use once every lease has ended, per key (-1:
// unreadable): polled until all are back or two leases and a second passed (the longest a
// lease of a client that stopped without releasing can last).
std::map<std::string, long long> permitsLeftInUse(Deployment& deployment, const std::vector<std::string>& keys,
                                                  std::chrono::milliseconds lease) {
  std::map<std::string, long long> inUse;
  const auto deadline = std::chrono::steady_clock::now() + lease * 2 + milliseconds(1000);
  while (true) {
    try {
      const auto backend = dlock::connect(deployment.lockUri(0));
      auto& semaphore = dynamic_cast<dlock::ISemaphoreOperator&>(*backend);
      for (const auto& key : keys) inUse[key] = semaphore.inspectSemaphore(key).inUse;
    } catch (const std::exception&) {
      for (const auto& key : keys) inUse[key] = -1;
    }
    const bool back = std::all_of(inUse.begin(), inUse.end(), [](const auto& each) { return each.second == 0; });
    if (back || std::chrono::steady_clock::now() >= deadline) return inUse;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// The live waiters each condition of the bounded buffer still has, by "key/name" (-1: unreadable):
// polled until none is left or the clients' waiter lease (two leases) and a second passed.
std::map<std::string, long long> conditionWaitersLeft(Deployment& deployment, const std::vector<std::string>& keys,
                                                      std::chrono::milliseconds lease) {
  std::map<std::string, long long> left;
  const auto deadline = std::chrono::steady_clock::now() + lease * 2 + milliseconds(1000);
  while (true) {
    try {
      const auto backend = dlock::connect(deployment.lockUri(0));
      auto& conditions = dynamic_cast<dlock::IConditionOperator&>(*backend);
      for (const auto& key : keys) {
        for (const char* name : {"notEmpty", "notFull"}) {
          left[key + "/" + name] = static_cast<long long>(conditions.inspectCondition(key, name).waiters.size());
        }
      }
    } catch (const std::exception&) {
      for (auto& each : left) each.second = -1;
    }
    const bool none = !left.empty() && std::all_of(left.begin(), left.end(), [](const auto& each) { return each.second == 0; });
    if (none || std::chrono::steady_clock::now() >= deadline) return left;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// Waits until every live client that is not paused has acquired something since `since`, or the
// recovery bound and a second passed (check 4 then sees who did not).
void awaitRecovery(Fleet& fleet, std::int64_t since, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound + milliseconds(1000);
  while (std::chrono::steady_clock::now() < deadline) {
    std::set<std::string> recovered;
    for (const Op& op : fleet.history()) {
      if (op.op == "acquire" && op.kind == Kind::Ok && op.timeNs > since) recovered.insert(op.process);
    }
    bool all = true;
    for (std::size_t slot = 0; slot < fleet.size(); ++slot) all = all && (fleet.paused(slot) || recovered.count(fleet.id(slot)) > 0);
    if (all) return;
    std::this_thread::sleep_for(milliseconds(50));
  }
}

// Runs the cycles, and again each one whose fault missed its holder, up to the retries.
std::vector<ClientExit> runWorkload(const Scenario& scenario, const Arguments& args, const Timing& timing,
                                    Deployment& deployment, const ClientSettings& settings, TtlSampler& sampler,
                                    HistoryWriter& nemesisLog) {
  const auto recordFault = [&](const std::string& fault, bool start, const Target* target) {
    Op op;
    op.process = "nemesis";
    op.kind = Kind::Info;
    op.op = start ? "fault-start" : "fault-end";
    op.value = fault;
    if (target != nullptr) {
      op.key = target->process;
      op.message = target->key;
    }
    nemesisLog.append(op);
  };
  Fleet fleet(settings, args.clients);
  Run run(deployment, fleet, args.seed, timing, recordFault, [&] { sampler.sample(); });
  run.onMiss([&](const std::string& why) {
    Op op;
    op.process = "nemesis";
    op.kind = Kind::Info;
    op.op = "fault-miss";
    op.value = why;
    nemesisLog.append(op);
  });
  // Warm: every client has taken a key once (at most the warm-up's bound).
  awaitRecovery(fleet, 0, timing.warmup);
  int hits = 0;
  for (int cycle = 0; cycle < args.cycles + args.retries && hits < args.cycles; ++cycle) {
    scenario.nemesis(run);
    deployment.heal();
    awaitRecovery(fleet, monotonicNs(), timing.recoveryBound);
    sampler.sample();
    const auto assessed = assessFaults(fleet.history(), scenario.expect);
    hits = static_cast<int>(std::count_if(assessed.begin(), assessed.end(), [](const FaultHit& hit) { return hit.asExpected; }));
    if (hits < args.cycles && scenario.expect.holderHit) {
      std::printf("[nemesis] %s-%s: cycle %d: %d of %d faults hit as meant so far\n", scenario.topology.c_str(),
                  scenario.name.c_str(), cycle + 1, hits, args.cycles);
      std::fflush(stdout);
    }
  }
  // SIGTERM ends a client after its current step; a step is bounded by the lease, the acquire
  // timeout and the store's timeout, so one still running after the hang bound has hung.
  return fleet.stop(std::chrono::steady_clock::now() + settings.hangBound);
}

bool runScenario(const Scenario& scenario, const Arguments& args, const char* self, std::ofstream* table) {
  Timing timing;
  if (args.holdMax.count() > 0) timing.holdMax = args.holdMax;
  const std::string name = scenario.topology + "-" + scenario.name;
  const std::string dir = args.out + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::printf("[nemesis] %s seed %llu%s: %s\n", name.c_str(), static_cast<unsigned long long>(args.seed),
              args.broken.empty() ? "" : (", broken " + args.broken).c_str(), scenario.summary.c_str());
  std::fflush(stdout);

  const auto deployment = scenario.deploy(args.clients);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < args.keys; ++i) keys.push_back("nemesis-" + std::to_string(i));
  const ClientSettings settings = settingsFor(args, self, timing, *deployment, keys, dir, scenario);

  CheckerInput input;
  TtlSampler sampler(*deployment, input.keyPrefix + "*");
  std::vector<ClientExit> exits;
  {
    // The server's own record of every data node, on links that bypass the proxies (a fault
    // never touches them): ServerObserver.h.
    const ServerObserver observer(deployment->observedAddresses(), keys, input.keyPrefix, dir + "/observer.history");
    HistoryWriter nemesisLog(dir + "/nemesis.history");
    // A semaphore's queue as the server holds it (check 10), on a link no fault touches.
    std::unique_ptr<StrandWatch> strands;
    if (scenario.primitive == "sem" && scenario.topology == "single") {
      strands = std::make_unique<StrandWatch>("redis://" + deployment->observedAddresses().front(), keys, nemesisLog);
    }
    exits = runWorkload(scenario, args, timing, *deployment, settings, sampler, nemesisLog);
    strands.reset();
  }
  sampler.sample();

  input.run = {scenario.topology, scenario.name, args.seed};
  input.history = readHistories(dir);
  FencedStore store(settings.store);
  input.store = store.snapshot(keys);
  input.keysWithoutTtl = sampler.found();
  input.exits = exits;
  input.recoveryBound = timing.recoveryBound;
  input.overlapCause = scenario.overlapsExplained;
  input.fenceRegressionCause = scenario.tokensBackExplained;
  input.faults = scenario.expect;
  input.cycles = args.cycles;
  input.fair = scenario.fair;
  input.serverRecord = true;
  // Only where a key lives on one server is its SET for another owner a loss: a Redlock node
  // outside the holder's quorum may rightly carry another owner's token (ServerObserver.h).
  input.serverSetsShowLosses = scenario.topology == "single";
  input.primitive = scenario.primitive;
  input.signalsOptional = scenario.signalsOptional;
  input.capacity = scenario.primitive == "cond" ? kBufferCapacity : kSemaphoreCapacity;
  input.lease = timing.lease;
  if (scenario.primitive == "sem") input.permitsInUseAfter = permitsLeftInUse(*deployment, keys, timing.lease);
  if (scenario.primitive == "cond") input.conditionWaitersAfter = conditionWaitersLeft(*deployment, keys, timing.lease);
  const Report report = check(input);
  std::ofstream(dir + "/report.json") << report.json();
  writeTimeline(dir + "/timeline.svg", input.history);
  std::printf("%s", report.summary().c_str());
  if (table != nullptr) *table << report.markdownRow() << "\n" << std::flush;
  std::printf("[nemesis] %s: %lld of %lld faults hit as meant, %lld missed; %s\n", name.c_str(), report.faultsOnHolders,
              report.faults, report.faultMisses,
              report.failed() ? ("FAILED checks " + report.failedChecks()).c_str() : "passed");
  std::fflush(stdout);
  return !report.failed();
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* skip = std::getenv("DLOCK_SKIP_INTEGRATION"); skip != nullptr && std::string(skip) == "1") {
    std::printf("SKIPPED: DLOCK_SKIP_INTEGRATION=1 — no fault tests ran\n");
    return 77;
  }
  Arguments args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "dlock_nemesis: %s\n%s", error.what(), kUsage);
    return 2;
  }
  if (args.help) {
    std::printf("%s", kUsage);
    return 0;
  }
  if (args.list) {
    for (const auto& scenario : scenarios()) {
      std::printf("%-8s %-24s %s\n", scenario.topology.c_str(), scenario.name.c_str(), scenario.summary.c_str());
    }
    return 0;
  }
  if (!args.seedGiven) args.seed = std::random_device{}() % 1000000;
  std::printf("[nemesis] seed %llu (replay: scripts/nemesis --seed %llu)\n", static_cast<unsigned long long>(args.seed),
              static_cast<unsigned long long>(args.seed));

  std::unique_ptr<std::ofstream> table;
  if (!args.table.empty()) {
    // The header once, after whatever the file already holds (a preface, earlier rows).
    bool hasHeader = false;
    {
      std::ifstream existing(args.table);
      const std::string header = Report::markdownHeader();
      const std::string firstLine = header.substr(0, header.find('\n'));
      for (std::string line; std::getline(existing, line);) hasHeader = hasHeader || line == firstLine;
    }
    table = std::make_unique<std::ofstream>(args.table, std::ios::app);
    if (!hasHeader) *table << Report::markdownHeader() << "\n";
  }
  int ran = 0;
  std::vector<std::string> failed;
  for (const auto& scenario : scenarios()) {
    if (args.topology != "all" && args.topology != scenario.topology) continue;
    if (args.scenario != "all" && args.scenario != scenario.name && args.scenario != scenario.topology + "-" + scenario.name) {
      continue;
    }
    ++ran;
    try {
      if (!runScenario(scenario, args, argv[0], table.get())) failed.push_back(scenario.topology + "-" + scenario.name);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "[nemesis] %s-%s could not run: %s\n", scenario.topology.c_str(), scenario.name.c_str(),
                   error.what());
      failed.push_back(scenario.topology + "-" + scenario.name + " (not run)");
    }
  }
  if (ran == 0) {
    std::fprintf(stderr, "dlock_nemesis: no scenario matches (see --list)\n");
    return 2;
  }
  std::printf("[nemesis] %d scenario(s), seed %llu: %s\n", ran, static_cast<unsigned long long>(args.seed),
              failed.empty() ? "all passed" : "failed:");
  for (const auto& name : failed) std::printf("  %s\n", name.c_str());
  return failed.empty() ? 0 : 1;
}
