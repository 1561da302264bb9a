// SPDX-License-Identifier: Apache-2.0
// handoff — P processes on one key, each doing locked read-modify-write increments (GET then SET)
// of a Redis counter, with one wait strategy. Reports acquisitions/s, hand-offs/s (an acquisition
// by a different process than the previous holder), acquire wait p50/p99/max, hand-off latency
// p50/p99 (the previous holder's unlock call to the next holder's acquisition), lock commands
// per hand-off (INFO commandstats: the commands the lock's clients sent) and the counter check.
// Usage: dlock_bench_handoff redis://127.0.0.1:PORT fixed|backoff|notify PROCESSES SECONDS
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "RawRedis.h"
#include "Workers.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"

namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: comparable across processes

struct Record {
  long long requested;  // lock() called
  long long acquired;   // lock() returned
  long long releasing;  // unlock() called
};

long long nowNanos() { return Clock::now().time_since_epoch().count(); }

std::shared_ptr<dlock::IWait> strategyNamed(const std::string& name) {
  if (name == "fixed") return std::make_shared<dlock::FixedIntervalWait>();
  if (name == "backoff") return std::make_shared<dlock::ExponentialBackoffWait>();
  if (name == "notify") return std::make_shared<dlock::NotifyWait>();
  throw std::runtime_error("unknown strategy " + name);
}

int worker(const std::string& uri, const std::string& strategy, long long start, long long end, const std::string& out) {
  auto lock = dlock::LockBuilder()
                  .backend(dlock::connect(uri))
                  .waitStrategy(strategyNamed(strategy))
                  .leaseTime(std::chrono::seconds(10))
                  .build();
  dlock::bench::RawRedis data(uri);
  std::vector<Record> records;
  records.reserve(1 << 16);
  std::this_thread::sleep_until(Clock::time_point(Clock::duration(start)));
  while (nowNanos() < end) {
    Record record{};
    record.requested = nowNanos();
    lock->lock("bench:handoff");
    record.acquired = nowNanos();
    const std::string seen = data.text({"GET", "bench:counter"});
    const long long value = seen.empty() || seen == "0" ? 0 : std::atoll(seen.c_str());
    data.command({"SET", "bench:counter", std::to_string(value + 1)});
    record.releasing = nowNanos();
    lock->unlock("bench:handoff");
    records.push_back(record);
  }
  std::ofstream file(out, std::ios::binary);
  file.write(reinterpret_cast<const char*>(records.data()),
             static_cast<std::streamsize>(records.size() * sizeof(Record)));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 7 && std::string(argv[1]) == "--worker") {
      return worker(argv[2], argv[3], std::atoll(argv[4]), std::atoll(argv[5]), argv[6]);
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
    admin.command({"CONFIG", "RESETSTAT"});
    const auto costBefore = admin.serverCost();

    const long long start = nowNanos() + 300'000'000;  // time for every worker to connect
    const long long end = start + static_cast<long long>(seconds * 1e9);
    char dirTemplate[] = "/tmp/dlock-bench-XXXXXX";
    const std::string dir = ::mkdtemp(dirTemplate);
    std::vector<pid_t> pids;
    std::vector<std::string> files;
    for (int p = 0; p < processes; ++p) {
      files.push_back(dir + "/worker-" + std::to_string(p));
      pids.push_back(dlock::bench::spawnWorker(
          argv[0], {uri, strategy, std::to_string(start), std::to_string(end), files.back()}));
    }
    const bool workersOk = dlock::bench::waitForWorkers(pids);
    const auto costAfter = admin.serverCost();

    // Merge: every acquisition, ordered by when it happened.
    struct Acquisition {
      Record record;
      int worker;
    };
    std::vector<Acquisition> all;
    for (int p = 0; p < processes; ++p) {
      std::ifstream in(files[static_cast<std::size_t>(p)], std::ios::binary);
      Record record{};
      while (in.read(reinterpret_cast<char*>(&record), sizeof record)) all.push_back({record, p});
      std::remove(files[static_cast<std::size_t>(p)].c_str());
    }
    ::rmdir(dir.c_str());
    std::sort(all.begin(), all.end(),
              [](const Acquisition& a, const Acquisition& b) { return a.record.acquired < b.record.acquired; });

    std::vector<double> waitsMs;
    std::vector<double> handoffUs;
    waitsMs.reserve(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) {
      waitsMs.push_back(static_cast<double>(all[i].record.acquired - all[i].record.requested) / 1e6);
      if (i > 0 && all[i].worker != all[i - 1].worker) {
        handoffUs.push_back(static_cast<double>(all[i].record.acquired - all[i - 1].record.releasing) / 1e3);
      }
    }

    // Commands the lock's clients sent. INFO commandstats also counts the calls scripts make
    // inside EVALSHA (GET, SET, INCR, PUBLISH, ...), which are not round trips, and the
    // workload's own GET/SET; neither is counted.
    auto calls = admin.commandCalls();
    long long lockCommands = 0;
    for (const char* name : {"evalsha", "eval", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "ping",
                             "auth", "select"}) {
      lockCommands += calls[name];
    }
    const std::string counter = admin.text({"GET", "bench:counter"});
    const bool counterExact = std::atoll(counter.c_str()) == static_cast<long long>(all.size());
    const double duration = seconds;
    dlock::bench::JsonLine("handoff")
        .field("strategy", strategy)
        .field("processes", static_cast<double>(processes))
        .field("acquisitions_per_s", static_cast<double>(all.size()) / duration)
        .field("handoffs_per_s", static_cast<double>(handoffUs.size()) / duration)
        .field("wait_p50_ms", dlock::bench::percentile(waitsMs, 50))
        .field("wait_p99_ms", dlock::bench::percentile(waitsMs, 99))
        .field("wait_max_ms", dlock::bench::percentile(waitsMs, 100))
        .field("handoff_p50_us", dlock::bench::percentile(handoffUs, 50))
        .field("handoff_p99_us", dlock::bench::percentile(handoffUs, 99))
        .field("commands_per_handoff",
               handoffUs.empty() ? 0.0 : static_cast<double>(lockCommands) / static_cast<double>(handoffUs.size()))
        .field("server_cpu_us_per_handoff", handoffUs.empty() ? 0.0
                                                              : (costAfter.cpuUs - costBefore.cpuUs) /
                                                                    static_cast<double>(handoffUs.size()))
        .field("counter_exact", counterExact && workersOk)
        .print();
    return counterExact && workersOk ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "handoff: %s\n", error.what());
    return 1;
  }
}
