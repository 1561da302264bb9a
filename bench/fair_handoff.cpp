// SPDX-License-Identifier: Apache-2.0
// fair_handoff — the fair lock's rows: P processes on one key, each doing locked read-modify-write
// increments (GET then SET) of a Redis counter through LockBuilder().fair(true). Measures in the
// same run the machine's round trip (raw PINGs) and the bound for this workload: an acquisition
// costs at least 3 RTT (GET, SET, and one RTT of hand-off), so 1 / (3 RTT) hand-offs/s. Reports
// hand-offs/s against it, hand-off p50/p99 (the previous holder's unlock call to the next
// holder's acquisition) in µs and in RTT, split at the unlock call's return (before: the
// release's round trip; after: the message and the heir's wake-up), wait p50/p99/max beside the
// mean cycle, commands per hand-off (INFO commandstats: what the lock's clients sent), the
// server's CPU and script time per hand-off, and the counter check; all over the steady window
// of Contention.h.
// With `async`, each worker waits with acquireAsync(key).get() (an async waiter's place and
// hand-off message) instead of lock(key): the two rows of one run compare the hand-offs.
// Usage: dlock_bench_fair_handoff redis://127.0.0.1:PORT PROCESSES SECONDS [LEASE_MS [async]]
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
#include "dlock/async.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

using dlock::bench::Clock;

// `lease`: the lease in ms, with ":async" for async waiters.
int worker(const std::string& uri, const std::string& lease, const dlock::bench::Window& window, const std::string& out) {
  auto lock = dlock::LockBuilder()
                  .backend(dlock::connect(uri))
                  .leaseTime(std::chrono::milliseconds(std::atoll(lease.c_str())))
                  .fair()
                  .build();
  dlock::bench::RawRedis data(uri);
  if (lease.find(":async") == std::string::npos) {
    dlock::bench::writeRecords(out, dlock::bench::runCycles(*lock, data, "bench:fair", "bench:fair-counter", window));
    return 0;
  }
  dlock::Lease held;
  dlock::bench::writeRecords(
      out, dlock::bench::runCyclesOf(
               window, [&] { held = lock->acquireAsync("bench:fair").get(); },
               [&] { dlock::bench::incrementCounter(data, "bench:fair-counter"); }, [&] { held.release(); }));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 8 && std::string(argv[1]) == "--worker") {
      const dlock::bench::Window window = dlock::bench::windowOf(argv);
      return worker(argv[2], argv[3], window, argv[7]);
    }
    if (argc < 4 || argc > 6) {
      std::fprintf(stderr, "usage: %s redis://host:port PROCESSES SECONDS [LEASE_MS [async]]\n", argv[0]);
      return 2;
    }
    const bool async = argc == 6 && std::string(argv[5]) == "async";
    const std::string uri = argv[1];
    const int processes = std::atoi(argv[2]);
    const double seconds = std::atof(argv[3]);
    const long long leaseMs = argc >= 5 ? std::atoll(argv[4]) : 2000;

    dlock::bench::RawRedis admin(uri);
    admin.command({"DEL", "bench:fair-counter"});
    const double rttUs = admin.roundTripUs();

    const dlock::bench::ContendedRun run = dlock::bench::runContended(argv[0], uri, std::to_string(leaseMs) + (async ? ":async" : ""),
                                                                       processes, seconds);
    const dlock::bench::Merged& merged = run.merged;
    const bool workersOk = run.workersOk;
    const std::vector<dlock::bench::Acquisition>& all = merged.timed;

    std::vector<double> waitsMs;
    std::vector<double> handoffUs;
    std::vector<double> unlockUs;        // the previous holder's unlock call: the release's round trip
    std::vector<double> afterUnlockUs;   // its unlock's return to the next holder's acquisition
    for (std::size_t i = 0; i < all.size(); ++i) {
      waitsMs.push_back(static_cast<double>(all[i].record.acquired - all[i].record.requested) / 1e6);
      if (i > 0 && all[i].worker != all[i - 1].worker) {
        handoffUs.push_back(static_cast<double>(all[i].record.acquired - all[i - 1].record.releasing) / 1e3);
        unlockUs.push_back(static_cast<double>(all[i - 1].record.released - all[i - 1].record.releasing) / 1e3);
        afterUnlockUs.push_back(static_cast<double>(all[i].record.acquired - all[i - 1].record.released) / 1e3);
      }
    }
    // The most acquisitions by others during one wait: FIFO allows P - 1 (each other process once)
    // whatever the machine's speed, where a wait in ms also counts the host's stalls; plus a grant
    // made while the request was on its way (the times are the clients', not the server's).
    long long maxTurnsWaited = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto first = std::lower_bound(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(i), all[i].record.requested,
                                          [](const dlock::bench::Acquisition& a, long long at) { return a.record.acquired < at; });
      maxTurnsWaited = std::max<long long>(maxTurnsWaited, all.begin() + static_cast<std::ptrdiff_t>(i) - first);
    }
    const std::string counter = admin.text({"GET", "bench:fair-counter"});
    const bool counterExact = std::atoll(counter.c_str()) == merged.cycles;
    const double handoffsPerS = static_cast<double>(handoffUs.size()) / seconds;
    const double boundPerS = 1e6 / (3 * rttUs);
    const double meanCycleMs = all.empty() ? 0.0 : seconds * 1e3 / static_cast<double>(all.size());
    const double handoffP50 = dlock::bench::percentile(handoffUs, 50);
    // The server's time per hand-off over the window, the workload's GET and SET included: at a
    // few hundred µs it, not the round trip, bounds the rate.
    const auto perHandoff = [&](double us) { return handoffUs.empty() ? 0.0 : us / static_cast<double>(handoffUs.size()); };
    dlock::bench::JsonLine("fair_handoff")
        .field("processes", static_cast<double>(processes))
        .field("async", async)
        .field("lease_ms", static_cast<double>(leaseMs))
        .field("rtt_us", rttUs)
        .field("bound_per_s", boundPerS)
        .field("acquisitions_per_s", static_cast<double>(all.size()) / seconds)
        .field("handoffs_per_s", handoffsPerS)
        .field("vs_bound", handoffsPerS / boundPerS)
        .field("handoff_p50_us", handoffP50)
        .field("handoff_p99_us", dlock::bench::percentile(handoffUs, 99))
        .field("handoff_p50_rtt", handoffP50 / rttUs)
        .field("unlock_p50_us", dlock::bench::percentile(unlockUs, 50))
        .field("after_unlock_p50_us", dlock::bench::percentile(afterUnlockUs, 50))
        .field("mean_cycle_ms", meanCycleMs)
        .field("wait_p50_ms", dlock::bench::percentile(waitsMs, 50))
        .field("wait_p99_ms", dlock::bench::percentile(waitsMs, 99))
        .field("wait_max_ms", dlock::bench::percentile(waitsMs, 100))
        .field("max_turns_waited", static_cast<double>(maxTurnsWaited))
        .field("commands_per_handoff",
               handoffUs.empty() ? 0.0 : static_cast<double>(run.lockCommands) / static_cast<double>(handoffUs.size()))
        .field("server_cpu_us_per_handoff", perHandoff(run.serverCpuUs))
        .field("script_us_per_handoff", perHandoff(run.scriptUs))
        .field("counter_exact", counterExact && workersOk)
        .print();
    return counterExact && workersOk ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fair_handoff: %s\n", error.what());
    return 1;
  }
}
