// SPDX-License-Identifier: Apache-2.0
// uncontended_cycle — lock+unlock cycles per second from one client, against two raw loops
// (RawRedis.h) measured in the same run on the same server over the same transport:
//  - bare: the physical limit of a lock, SET NX PX then EVALSHA of a compare-and-delete script;
//  - scripts: dlock's own acquire and release scripts with dlock's keys and arguments, sent by
//    the raw client. dlock / scripts is the client's cost; scripts / bare is what the protocol's
//    server work (fence, release record, publish) costs.
// Rounds alternate the loops so drift in the machine's load hits all alike; the median round of
// each is reported, and what the server and this client spent per cycle of each (CPU time, and the
// server's time inside scripts), which the machine's noise moves far less than the rates.
// Usage: dlock_bench_uncontended_cycle URI [rounds] [seconds-per-round]
//   URI: redis://127.0.0.1:PORT, rediss://127.0.0.1:PORT?tls_ca_file=CA, or unix:///path/redis.sock
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "BenchReport.h"
#include "RawRedis.h"
#include "redis/src/KeyNames.h"  // backends/redis/src: the scripts' keys and sources, as RedisOperator sends them
#include "redis/src/Scripts.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/Token.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Round {
  double cyclesPerSecond = 0;
  std::vector<double> latenciesUs;
};

template <class Cycle>
Round runRound(double seconds, Cycle&& cycle) {
  Round round;
  long long cycles = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    cycle(cycles);
    round.latenciesUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    ++cycles;
  }
  round.cyclesPerSecond = static_cast<double>(cycles) / dlock::bench::secondsSince(start);
  return round;
}

Round median(std::vector<Round> rounds) {
  std::sort(rounds.begin(), rounds.end(),
            [](const Round& a, const Round& b) { return a.cyclesPerSecond < b.cyclesPerSecond; });
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s redis://host:port|rediss://...|unix:///path [rounds] [seconds]\n", argv[0]);
    return 2;
  }
  const std::string uri = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 1.0;

  dlock::bench::RawRedis raw(uri);
  const std::string releaseSha = raw.text(
      {"SCRIPT", "LOAD", "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"});
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(std::chrono::seconds(30)).build();

  const auto rawCycle = [&](long long i) {
    const std::string token = "token-" + std::to_string(i);
    raw.command({"SET", "bench:raw", token, "NX", "PX", "30000"});
    raw.command({"EVALSHA", releaseSha, "1", "bench:raw", token});
  };
  // The arguments RedisOperator sends with the default options (RedisOperatorOptions.h).
  const dlock::detail::KeyNames names("dlock:", "bench:scripts", false);
  const std::string acquireSha = raw.text({"SCRIPT", "LOAD", dlock::detail::acquireScript().source});
  const std::string releaseScriptSha = raw.text({"SCRIPT", "LOAD", dlock::detail::releaseScript().source});
  const std::string fence = names.fence();
  const std::string channel = names.channel();
  const std::string owner = names.owner();
  const auto scriptsCycle = [&](long long) {
    const std::string token = dlock::generateToken();
    const std::string record = names.releaseRecord(token);
    raw.command({"EVALSHA", acquireSha, "2", names.lock(), fence, token, "30000", "86400000", record});
    raw.command({"EVALSHA", releaseScriptSha, "1", names.lock(), token, channel, record, "2000", "0", owner});
  };
  const auto dlockCycle = [&](long long) {
    lock->lock("bench:dlock");
    lock->unlock("bench:dlock");
  };
  runRound(0.3, rawCycle);  // warm-up: connections, scripts, caches
  runRound(0.3, scriptsCycle);
  runRound(0.3, dlockCycle);

  // Each loop's rounds, and what the server spent on them (INFO before and after each round).
  struct Loop {
    std::vector<Round> rounds;
    double serverCpuUs = 0;
    double scriptUs = 0;
    double clientCpuUs = 0;
    double cycles = 0;
    [[nodiscard]] double cpuPerCycle() const { return serverCpuUs / cycles; }
    [[nodiscard]] double clientPerCycle() const { return clientCpuUs / cycles; }
    [[nodiscard]] double scriptPerCycle() const { return scriptUs / cycles; }
  };
  const auto measure = [&](Loop& loop, const auto& cycle) {
    const auto before = raw.serverCost();
    const double clientBefore = dlock::bench::cpuSeconds();
    loop.rounds.push_back(runRound(seconds, cycle));
    loop.clientCpuUs += (dlock::bench::cpuSeconds() - clientBefore) * 1e6;
    const auto after = raw.serverCost();
    loop.serverCpuUs += after.cpuUs - before.cpuUs;
    loop.scriptUs += after.scriptUs - before.scriptUs;
    loop.cycles += static_cast<double>(loop.rounds.back().latenciesUs.size());
  };
  Loop rawLoop;
  Loop scriptsLoop;
  Loop dlockLoop;
  for (int r = 0; r < rounds; ++r) {
    measure(rawLoop, rawCycle);
    measure(scriptsLoop, scriptsCycle);
    measure(dlockLoop, dlockCycle);
  }
  const Round rawMedian = median(rawLoop.rounds);
  const Round scriptsMedian = median(scriptsLoop.rounds);
  const Round dlockMedian = median(dlockLoop.rounds);
  const std::string scheme = dlock::parseUri(uri).scheme;
  dlock::bench::JsonLine("uncontended_cycle")
      .field("transport", scheme == "rediss" ? std::string("tls") : scheme == "unix" ? std::string("unix") : std::string("tcp"))
      .field("raw_cycles_per_s", rawMedian.cyclesPerSecond)
      .field("dlock_cycles_per_s", dlockMedian.cyclesPerSecond)
      .field("scripts_cycles_per_s", scriptsMedian.cyclesPerSecond)
      .field("ratio", dlockMedian.cyclesPerSecond / rawMedian.cyclesPerSecond)
      .field("ratio_to_scripts", dlockMedian.cyclesPerSecond / scriptsMedian.cyclesPerSecond)
      .field("scripts_ratio", scriptsMedian.cyclesPerSecond / rawMedian.cyclesPerSecond)
      .field("raw_p50_us", dlock::bench::percentile(rawMedian.latenciesUs, 50))
      .field("raw_p99_us", dlock::bench::percentile(rawMedian.latenciesUs, 99))
      .field("scripts_p50_us", dlock::bench::percentile(scriptsMedian.latenciesUs, 50))
      .field("scripts_p99_us", dlock::bench::percentile(scriptsMedian.latenciesUs, 99))
      .field("dlock_p50_us", dlock::bench::percentile(dlockMedian.latenciesUs, 50))
      .field("dlock_p99_us", dlock::bench::percentile(dlockMedian.latenciesUs, 99))
      .field("raw_server_cpu_us", rawLoop.cpuPerCycle())
      .field("scripts_server_cpu_us", scriptsLoop.cpuPerCycle())
      .field("dlock_server_cpu_us", dlockLoop.cpuPerCycle())
      .field("raw_client_cpu_us", rawLoop.clientPerCycle())
      .field("scripts_client_cpu_us", scriptsLoop.clientPerCycle())
      .field("dlock_client_cpu_us", dlockLoop.clientPerCycle())
      .field("raw_script_us", rawLoop.scriptPerCycle())
      .field("scripts_script_us", scriptsLoop.scriptPerCycle())
      .field("dlock_script_us", dlockLoop.scriptPerCycle())
      .field("rounds", static_cast<double>(rounds))
      .print();
  return 0;
}
