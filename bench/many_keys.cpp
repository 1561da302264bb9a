// SPDX-License-Identifier: Apache-2.0
// many_keys — 1, 100 and 10,000 keys held by one process under the watchdog: renewal round trips
// and renewal commands per interval, and the client's CPU time, while the keys are held.
// Usage: dlock_bench_many_keys redis://127.0.0.1:PORT [seconds]
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "RawRedis.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

long long evalshaCalls(dlock::bench::RawRedis& admin) { return admin.commandCalls()["evalsha"]; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s redis://host:port [seconds]\n", argv[0]);
    return 2;
  }
  const std::string uri = argv[1];
  const double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
  const auto lease = std::chrono::milliseconds(1500);  // renewed every 500 ms
  dlock::bench::RawRedis admin(uri);

  for (int keys : {1, 100, 10000}) {
    auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).watchdogLease(lease).build();
    for (int i = 0; i < keys; ++i) lock->lock("bench:many:" + std::to_string(i));
    const auto statsBefore = lock->stats();
    const long long commandsBefore = evalshaCalls(admin);
    const double cpuBefore = dlock::bench::cpuSeconds();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    const double cpu = dlock::bench::cpuSeconds() - cpuBefore;
    const long long commands = evalshaCalls(admin) - commandsBefore;
    const auto stats = lock->stats();
    for (int i = 0; i < keys; ++i) lock->unlock("bench:many:" + std::to_string(i));
    const double intervals = seconds / (static_cast<double>(lease.count()) / 3000.0);
    dlock::bench::JsonLine("many_keys")
        .field("keys", static_cast<double>(keys))
        .field("round_trips_per_interval",
               static_cast<double>(stats.renewalRoundTrips - statsBefore.renewalRoundTrips) / intervals)
        .field("commands_per_interval", static_cast<double>(commands) / intervals)
        .field("renewals_per_interval", static_cast<double>(stats.renewals - statsBefore.renewals) / intervals)
        .field("client_cpu_ms_per_s", cpu * 1000.0 / seconds)
        .field("lost", static_cast<double>(stats.lostLeases))
        .print();
  }
  return 0;
}
