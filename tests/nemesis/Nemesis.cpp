// dlock_nemesis — runs fault-test scenarios: for each, deploys its topology with a LinkProxy on
// every link and a fault-free store, starts the workload (dlock_nemesis_client processes), lets
// the nemesis inject its faults on a schedule drawn from the seed, heals, waits out the recovery
// bound, stops the clients, and checks the run (Checker.h). Every run prints its seed.
//
//   dlock_nemesis [--scenario NAME|all] [--topology T|all] [--seed S] [--cycles N]
//                 [--clients N] [--keys N] [--hold-max-ms M] [--out DIR] [--table FILE]
//                 [--client PATH] [--list]
//
// --cycles repeats the nemesis (each cycle: fault, then the recovery bound) in one run; the short
// profile is 1, scripts/nemesis --long raises it, with shorter holds (--hold-max-ms) and more keys
// for more acquisitions per second. Writes DIR/<topology>-<scenario>/ with every
// history, report.json and timeline.svg; appends each run's row to --table. Exit 1 when a run
// failed checks 1, 3, 4, 5, 6 or 7; 2 on bad arguments or a run that could not be set up.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "Checker.h"
#include "FencedStore.h"
#include "Fleet.h"
#include "History.h"
#include "KeyScan.h"
#include "Scenario.h"
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
  bool list = false;
};

Arguments parse(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    if (name == "--list") {
      args.list = true;
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
    } else {
      throw std::invalid_argument("unknown option " + name);
    }
  }
  if (args.cycles < 1 || args.clients < 1 || args.keys < 1) throw std::invalid_argument("counts must be positive");
  return args;
}

// dlock_nemesis_client beside this executable, unless named.
std::string clientExecutable(const Arguments& args, const char* self) {
  if (!args.client.empty()) return args.client;
  return (std::filesystem::path(self).parent_path() / "dlock_nemesis_client").string();
}

bool runScenario(const Scenario& scenario, const Arguments& args, const char* self, std::ofstream* table) {
  Timing timing;
  if (args.holdMax.count() > 0) timing.holdMax = args.holdMax;
  const std::string name = scenario.topology + "-" + scenario.name;
  const std::string dir = args.out + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::printf("[nemesis] %s seed %llu: %s\n", name.c_str(), static_cast<unsigned long long>(args.seed),
              scenario.summary.c_str());
  std::fflush(stdout);

  const auto deployment = scenario.deploy(args.clients);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < args.keys; ++i) keys.push_back("nemesis-" + std::to_string(i));

  ClientSettings settings;
  settings.executable = clientExecutable(args, self);
  settings.lockUri = [&deployment](std::size_t slot) { return deployment->lockUri(slot); };
  settings.store = deployment->store().host() + ":" + std::to_string(deployment->store().port());
  settings.keys = keys;
  settings.lease = timing.lease;
  settings.acquireTimeout = timing.acquireTimeout;
  // Holds from a few ms to beyond the renewal period, so that a fault often finds a client
  // inside its critical section.
  settings.hold = timing.holdMin;
  settings.extraArguments = {"--hold-max-ms", std::to_string(timing.holdMax.count())};
  settings.historyDirectory = dir;
  settings.seed = args.seed;

  HistoryWriter nemesisLog(dir + "/nemesis.history");
  const auto recordFault = [&](const std::string& fault, bool start) {
    Op op;
    op.process = "nemesis";
    op.kind = Kind::Info;
    op.op = start ? "fault-start" : "fault-end";
    op.value = fault;
    nemesisLog.append(op);
  };

  std::vector<ClientExit> exits;
  {
    Fleet fleet(settings, args.clients);
    Run run(*deployment, fleet, args.seed, timing, recordFault);
    run.sleep(timing.warmup);
    for (int cycle = 0; cycle < args.cycles; ++cycle) {
      scenario.nemesis(run);
      deployment->heal();
      run.sleep(timing.recoveryBound + milliseconds(1000));
    }
    // SIGTERM ends a client after its current step; a step is bounded by the lease, the acquire
    // timeout and the store's timeout, so one still running after the hang bound has hung.
    exits = fleet.stop(std::chrono::steady_clock::now() + settings.hangBound);
  }

  CheckerInput input;
  input.run = {scenario.topology, scenario.name, args.seed};
  input.history = readHistories(dir);
  FencedStore store(settings.store);
  input.store = store.snapshot(keys);
  for (const auto& server : deployment->dataAddresses()) {
    for (auto& key : keysWithoutTtl(server, input.keyPrefix + "*")) input.keysWithoutTtl.push_back(std::move(key));
  }
  input.exits = exits;
  input.recoveryBound = timing.recoveryBound;
  const Report report = check(input);
  std::ofstream(dir + "/report.json") << report.json();
  writeTimeline(dir + "/timeline.svg", input.history);
  std::printf("%s\n", report.summary().c_str());
  if (report.unfencedLostUpdates > 0) {
    std::printf("[nemesis] %s: %lld unfenced lost updates%s%s\n", name.c_str(), report.unfencedLostUpdates,
                scenario.overlapsExplained.empty() ? " where the lock must keep sections apart" : ": ",
                scenario.overlapsExplained.c_str());
  }
  if (table != nullptr) *table << report.markdownRow() << "\n" << std::flush;
  std::printf("[nemesis] %s: %s\n", name.c_str(), report.failed() ? ("FAILED checks " + report.failedChecks()).c_str() : "passed");
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
    std::fprintf(stderr, "dlock_nemesis: %s (see the top of Nemesis.cpp)\n", error.what());
    return 2;
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
