// SPDX-License-Identifier: Apache-2.0
// readers — read holds scale: one reader process cycling read holds on one name (acquire +
// release, PrimitiveCycles.h), then P reader processes on the same name, in the same run over the
// steady window of Contention.h. Reports each phase's read cycles/s (the aggregate, for P),
// cycle p50/p99, the server's CPU per cycle and how busy that kept it, and P's aggregate over the
// one reader's rate (the target: >= 8 at P = 16).
// Usage: dlock_bench_readers redis://127.0.0.1:PORT PROCESSES SECONDS
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "BenchReport.h"
#include "Contention.h"
#include "PrimitiveCycles.h"

namespace {

constexpr const char* kName = "bench:readers";

// Whole read cycles (readCycle: acquire + release), each timed as one Record's request to its
// acquisition.
int worker(const std::string& uri, const dlock::bench::Window& window, const std::string& out) {
  const dlock::bench::Primitives primitives(uri);
  const auto cycle = [&] { dlock::bench::readCycle(primitives.readWrite, kName); };
  dlock::bench::writeRecords(out, dlock::bench::runCyclesOf(window, cycle, [] {}, [] {}));
  return 0;
}

struct Phase {
  double cyclesPerS = 0;
  double p50Us = 0;
  double p99Us = 0;
  double serverCpuUsPerCycle = 0;
  bool ok = false;
};

Phase measurePhase(const char* program, const std::string& uri, int processes, double seconds) {
  const dlock::bench::ContendedRun run = dlock::bench::runContended(program, uri, "read", processes, seconds);
  std::vector<double> cycleUs;
  for (const auto& each : run.merged.timed) {
    cycleUs.push_back(static_cast<double>(each.record.acquired - each.record.requested) / 1e3);
  }
  Phase phase;
  phase.cyclesPerS = static_cast<double>(cycleUs.size()) / seconds;
  phase.p50Us = dlock::bench::percentile(cycleUs, 50);
  phase.p99Us = dlock::bench::percentile(cycleUs, 99);
  phase.serverCpuUsPerCycle = cycleUs.empty() ? 0.0 : run.serverCpuUs / static_cast<double>(cycleUs.size());
  phase.ok = run.workersOk && !cycleUs.empty();
  return phase;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 8 && std::string(argv[1]) == "--worker") return worker(argv[2], dlock::bench::windowOf(argv), argv[7]);
    if (argc != 4) {
      std::fprintf(stderr, "usage: %s redis://host:port PROCESSES SECONDS\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const int processes = std::atoi(argv[2]);
    const double seconds = std::atof(argv[3]);
    const Phase one = measurePhase(argv[0], uri, 1, seconds);
    const Phase many = measurePhase(argv[0], uri, processes, seconds);
    dlock::bench::JsonLine("readers")
        .field("processes", static_cast<double>(processes))
        .field("one_cycles_per_s", one.cyclesPerS)
        .field("one_p50_us", one.p50Us)
        .field("one_p99_us", one.p99Us)
        .field("one_server_cpu_us", one.serverCpuUsPerCycle)
        .field("one_server_busy", one.cyclesPerS * one.serverCpuUsPerCycle / 1e6)
        .field("many_cycles_per_s", many.cyclesPerS)
        .field("many_p50_us", many.p50Us)
        .field("many_p99_us", many.p99Us)
        .field("many_server_cpu_us", many.serverCpuUsPerCycle)
        .field("many_server_busy", many.cyclesPerS * many.serverCpuUsPerCycle / 1e6)
        .field("scaling", one.cyclesPerS > 0 ? many.cyclesPerS / one.cyclesPerS : 0.0)
        .field("ok", one.ok && many.ok)
        .print();
    return one.ok && many.ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "readers: %s\n", error.what());
    return 1;
  }
}
