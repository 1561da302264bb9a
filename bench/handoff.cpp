// SPDX-License-Identifier: Apache-2.0
// handoff — P processes on one key, each doing locked read-modify-write increments (GET then SET)
// of a Redis counter, with one wait strategy. Reports acquisitions/s, hand-offs/s (an acquisition
// by a different process than the previous holder), acquire wait p50/p99/max, hand-off latency
// p50/p99 (the previous holder's unlock call to the next holder's acquisition), lock commands
// per hand-off (INFO commandstats: the commands the lock's clients sent) and the counter check;
// all over the steady window of Contention.h.
// Usage: dlock_bench_handoff redis://127.0.0.1:PORT fixed|backoff|notify PROCESSES SECONDS
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "BenchReport.h"
#include "Contention.h"
#include "RawRedis.h"
#include "Workers.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"

namespace {

std::shared_ptr<dlock::IWait> strategyNamed(const std::string& name) {
  if (name == "fixed") return std::make_shared<dlock::FixedIntervalWait>();
  if (name == "backoff") return std::make_shared<dlock::ExponentialBackoffWait>();
  if (name == "notify") return std::make_shared<dlock::NotifyWait>();
  throw std::runtime_error("unknown strategy " + name);
}

int worker(const std::string& uri, const std::string& strategy, const dlock::bench::Window& window,
           const std::string& out) {
  auto lock = dlock::LockBuilder()
                  .backend(dlock::connect(uri))
                  .waitStrategy(strategyNamed(strategy))
                  .leaseTime(std::chrono::seconds(10))
                  .build();
  dlock::bench::RawRedis data(uri);
  dlock::bench::writeRecords(out, dlock::bench::runCycles(*lock, data, "bench:handoff", "bench:counter", window));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 8 && std::string(argv[1]) == "--worker") {
      const dlock::bench::Window window = dlock::bench::windowOf(argv);
      return worker(argv[2], argv[3], window, argv[7]);
    }
    if (argc != 5) {
      std::fprintf(stderr, "usage: %s redis://host:port fixed|backoff|notify PROCESSES SECONDS\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const std::string strategy = argv[2];
    const int processes = std::atoi(argv[3]);
    const double seconds = std::atof(argv[4]);
    (void)strategyNamed(strategy);

    dlock::bench::RawRedis admin(uri);
    admin.command({"DEL", "bench:counter"});

    const dlock::bench::ContendedRun run = dlock::bench::runContended(argv[0], uri, strategy, processes, seconds);
    const dlock::bench::Merged& merged = run.merged;
    const bool workersOk = run.workersOk;
    const std::vector<dlock::bench::Acquisition>& all = merged.timed;

    std::vector<double> waitsMs;
    std::vector<double> handoffUs;
    waitsMs.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      waitsMs.push_back(static_cast<double>(all[i].record.acquired - all[i].record.requested) / 1e6);
      if (i > 0 && all[i].worker != all[i - 1].worker) {
        handoffUs.push_back(static_cast<double>(all[i].record.acquired - all[i - 1].record.releasing) / 1e3);
      }
    }

    // The slowest 1% of waits, and what they waited through (the p99's evidence).
    const dlock::bench::WaitTurns turns = dlock::bench::waitTurns(all);
    const double slowMs = dlock::bench::percentile(waitsMs, 99);
    double slowCount = 0, slowTurns = 0, slowOvertaken = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (waitsMs[i] < slowMs) continue;
      ++slowCount;
      slowTurns += turns.turns[i];
      slowOvertaken += turns.overtaken[i];
    }
    const auto perSlow = [&](double total) { return slowCount == 0 ? 0.0 : total / slowCount; };

    const std::string counter = admin.text({"GET", "bench:counter"});
    const bool counterExact = std::atoll(counter.c_str()) == merged.cycles;
    const double duration = seconds;
    dlock::bench::JsonLine("handoff")
        .field("strategy", strategy)
        .field("processes", static_cast<double>(processes))
        .field("acquisitions_per_s", static_cast<double>(all.size()) / duration)
        .field("handoffs_per_s", static_cast<double>(handoffUs.size()) / duration)
        .field("wait_p50_ms", dlock::bench::percentile(waitsMs, 50))
        .field("wait_p99_ms", dlock::bench::percentile(waitsMs, 99))
        .field("wait_max_ms", dlock::bench::percentile(waitsMs, 100))
        .field("turns_p99", dlock::bench::percentile(turns.turns, 99))
        .field("turns_max", dlock::bench::percentile(turns.turns, 100))
        .field("overtaken_p99", dlock::bench::percentile(turns.overtaken, 99))
        .field("slowest_turns_mean", perSlow(slowTurns))
        .field("slowest_overtaken_mean", perSlow(slowOvertaken))
        .field("handoff_p50_us", dlock::bench::percentile(handoffUs, 50))
        .field("handoff_p99_us", dlock::bench::percentile(handoffUs, 99))
        .field("commands_per_handoff",
               handoffUs.empty() ? 0.0 : static_cast<double>(run.lockCommands) / static_cast<double>(handoffUs.size()))
        .field("server_cpu_us_per_handoff", handoffUs.empty() ? 0.0
                                                              : run.serverCpuUs /
                                                                    static_cast<double>(handoffUs.size()))
        .field("counter_exact", counterExact && workersOk)
        .print();
    return counterExact && workersOk ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "handoff: %s\n", error.what());
    return 1;
  }
}
