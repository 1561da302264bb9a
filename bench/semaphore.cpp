// SPDX-License-Identifier: Apache-2.0
// semaphore — P processes on one semaphore of capacity C, each taking one permit at a time
// (acquirePermitWaiting, PrimitiveCycles.h: queued when none is free, admitted by a release) and
// doing the contended benchmarks' workload under it (GET then SET of a counter, Contention.h).
// Reports grants/s, acquire wait p50/p99/max, the commands the semaphore's clients sent per
// grant (INFO commandstats: EVALSHA, SUBSCRIBE, ...; not the calls inside scripts, nor the
// workload's GET and SET), the server's CPU per grant, and the most permits held at once as the
// clients saw them (each from its acquisition's return to its release call: inside the server's
// hold, so more than C is a broken semaphore). The counter is not checked: C holders increment
// it at once, by design. All over the steady window of Contention.h.
// Usage: dlock_bench_semaphore redis://127.0.0.1:PORT CAPACITY PROCESSES SECONDS
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "BenchReport.h"
#include "Contention.h"
#include "PrimitiveCycles.h"

namespace {

constexpr const char* kName = "bench:semaphore";
constexpr const char* kCounter = "bench:semaphore-counter";

int worker(const std::string& uri, std::uint32_t capacity, const dlock::bench::Window& window, const std::string& out) {
  const dlock::bench::Primitives primitives(uri);
  dlock::bench::RawRedis data(uri);
  std::string token;
  const auto acquire = [&] { token = dlock::bench::acquirePermitWaiting(primitives.semaphore, kName, capacity); };
  const auto work = [&] { dlock::bench::incrementCounter(data, kCounter); };
  const auto release = [&] { dlock::bench::releasePermit(primitives.semaphore, kName, token); };
  dlock::bench::writeRecords(out, dlock::bench::runCyclesOf(window, acquire, work, release));
  return 0;
}

// The most holds open at once, each from its acquisition to its release call.
long long mostHeldAtOnce(const std::vector<dlock::bench::Acquisition>& all) {
  std::vector<std::pair<long long, int>> edges;  // (time, +1 acquired / -1 releasing)
  for (const auto& each : all) {
    edges.emplace_back(each.record.acquired, 1);
    edges.emplace_back(each.record.releasing, -1);
  }
  std::sort(edges.begin(), edges.end());  // at one time, a release (-1) before an acquisition
  long long held = 0;
  long long most = 0;
  for (const auto& [at, step] : edges) {
    held += step;
    most = std::max(most, held);
  }
  return most;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 8 && std::string(argv[1]) == "--worker") {
      return worker(argv[2], static_cast<std::uint32_t>(std::atoi(argv[3])), dlock::bench::windowOf(argv), argv[7]);
    }
    if (argc != 5) {
      std::fprintf(stderr, "usage: %s redis://host:port CAPACITY PROCESSES SECONDS\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const int capacity = std::atoi(argv[2]);
    const int processes = std::atoi(argv[3]);
    const double seconds = std::atof(argv[4]);
    dlock::bench::RawRedis admin(uri);
    admin.command({"DEL", kCounter});

    const dlock::bench::ContendedRun run =
        dlock::bench::runContended(argv[0], uri, std::to_string(capacity), processes, seconds);
    const std::vector<dlock::bench::Acquisition>& all = run.merged.timed;
    std::vector<double> waitsMs;
    for (const auto& each : all) waitsMs.push_back(static_cast<double>(each.record.acquired - each.record.requested) / 1e6);
    const double grants = static_cast<double>(all.size());
    const long long most = mostHeldAtOnce(all);
    const bool ok = run.workersOk && !all.empty() && most <= capacity;
    dlock::bench::JsonLine("semaphore")
        .field("capacity", static_cast<double>(capacity))
        .field("processes", static_cast<double>(processes))
        .field("grants_per_s", grants / seconds)
        .field("wait_p50_ms", dlock::bench::percentile(waitsMs, 50))
        .field("wait_p99_ms", dlock::bench::percentile(waitsMs, 99))
        .field("wait_max_ms", dlock::bench::percentile(waitsMs, 100))
        .field("commands_per_grant", grants > 0 ? static_cast<double>(run.lockCommands) / grants : 0.0)
        .field("server_cpu_us_per_grant", grants > 0 ? run.serverCpuUs / grants : 0.0)
        .field("script_us_per_grant", grants > 0 ? run.scriptUs / grants : 0.0)
        .field("most_held", static_cast<double>(most))
        .field("ok", ok)
        .print();
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "semaphore: %s\n", error.what());
    return 1;
  }
}
