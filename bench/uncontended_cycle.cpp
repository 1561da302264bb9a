// SPDX-License-Identifier: Apache-2.0
// uncontended_cycle — lock+unlock cycles per second from one client, against two raw loops
// (RawRedis.h) measured in the same run on the same server over the same transport:
//  - bare: the physical limit of a lock, SET NX PX then EVALSHA of a compare-and-delete script;
//  - scripts: dlock's own acquire and release scripts with dlock's keys and arguments, sent by
//    the raw client. dlock / scripts is the client's cost; scripts / bare is what the protocol's
//    server work (fence, release record, publish) costs.
// Rounds alternate the loops so drift in the machine's load hits all alike; the median round of
// each is reported, and what the server and this client spent per cycle of each (CPU time, the
// server's time inside scripts, and its calls: INFO commandstats, the calls scripts make inside
// included), which the machine's noise moves far less than the rates.
// Beside the exclusive lock, in the same rounds: the read-write lock's read and write cycles and
// the semaphore's permit cycle (PrimitiveCycles.h), none of which may cost more server calls.
// Usage: dlock_bench_uncontended_cycle URI [rounds] [seconds-per-round]
//   URI: redis://127.0.0.1:PORT, rediss://127.0.0.1:PORT?tls_ca_file=CA, or unix:///path/redis.sock
#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <cstdlib>
#include <string>
#include <vector>

#include "BenchReport.h"
#include "PrimitiveCycles.h"
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

Round runRound(double seconds, const std::function<void(long long)>& cycle) {
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

// One loop's rounds and what the server and this client spent on them.
struct Loop {
  Loop(std::string loopName, std::function<void(long long)> loopCycle)
      : name(std::move(loopName)), cycle(std::move(loopCycle)) {}
  std::string name;
  std::function<void(long long)> cycle;
  std::vector<Round> rounds;
  double serverCpuUs = 0;
  double scriptUs = 0;
  double clientCpuUs = 0;
  double calls = 0;  // the server's calls, the scripts' own included (not the INFO around a round)
  double cycles = 0;
};

// The server's calls so far but INFO's (commandstats counts what scripts call too).
double serverCalls(dlock::bench::RawRedis& raw) {
  double calls = 0;
  for (const auto& [command, count] : raw.commandCalls()) {
    if (command != "info") calls += static_cast<double>(count);
  }
  return calls;
}

// One round of `loop`, with INFO before and after it.
void measure(dlock::bench::RawRedis& raw, Loop& loop, double seconds) {
  const auto before = raw.serverCost();
  const double callsBefore = serverCalls(raw);
  const double clientBefore = dlock::bench::cpuSeconds();
  loop.rounds.push_back(runRound(seconds, loop.cycle));
  loop.clientCpuUs += (dlock::bench::cpuSeconds() - clientBefore) * 1e6;
  loop.calls += serverCalls(raw) - callsBefore;
  const auto after = raw.serverCost();
  loop.serverCpuUs += after.cpuUs - before.cpuUs;
  loop.scriptUs += after.scriptUs - before.scriptUs;
  loop.cycles += static_cast<double>(loop.rounds.back().latenciesUs.size());
}

const Loop& findLoop(const std::vector<Loop>& loops, const std::string& name) {
  return *std::find_if(loops.begin(), loops.end(), [&](const Loop& loop) { return loop.name == name; });
}

// The median round's rate and latencies, and the per-cycle costs, as `<loop>_...` fields.
void report(dlock::bench::JsonLine& line, const Loop& loop) {
  const Round middle = median(loop.rounds);
  const std::string& p = loop.name;
  line.field(p + "_cycles_per_s", middle.cyclesPerSecond)
      .field(p + "_p50_us", dlock::bench::percentile(middle.latenciesUs, 50))
      .field(p + "_p99_us", dlock::bench::percentile(middle.latenciesUs, 99))
      .field(p + "_server_cpu_us", loop.serverCpuUs / loop.cycles)
      .field(p + "_client_cpu_us", loop.clientCpuUs / loop.cycles)
      .field(p + "_script_us", loop.scriptUs / loop.cycles)
      .field(p + "_calls_per_cycle", loop.calls / loop.cycles);
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
  const dlock::bench::Primitives primitives(uri);
  auto lock = dlock::LockBuilder().backend(primitives.backend).leaseTime(std::chrono::seconds(30)).build();

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
  const auto readCycle = [&](long long) { dlock::bench::readCycle(primitives.readWrite, "bench:read"); };
  const auto writeCycle = [&](long long) { dlock::bench::writeCycle(primitives.readWrite, "bench:write"); };
  const auto permitCycle = [&](long long) { dlock::bench::permitCycle(primitives.semaphore, "bench:permits", 4); };

  // Each loop's rounds, and what the server spent on them (INFO before and after each round).
  std::vector<Loop> loops = {{"raw", rawCycle},     {"scripts", scriptsCycle}, {"dlock", dlockCycle},
                             {"read", readCycle},   {"write", writeCycle},     {"permit", permitCycle}};
  for (Loop& loop : loops) runRound(0.3, loop.cycle);  // warm-up: connections, scripts, caches
  for (int r = 0; r < rounds; ++r) {
    for (Loop& loop : loops) measure(raw, loop, seconds);
  }
  const auto rateOf = [&](const char* name) { return median(findLoop(loops, name).rounds).cyclesPerSecond; };
  const std::string scheme = dlock::parseUri(uri).scheme;
  dlock::bench::JsonLine line("uncontended_cycle");
  line.field("transport", scheme == "rediss" ? std::string("tls") : scheme == "unix" ? std::string("unix") : std::string("tcp"))
      .field("ratio", rateOf("dlock") / rateOf("raw"))
      .field("ratio_to_scripts", rateOf("dlock") / rateOf("scripts"))
      .field("scripts_ratio", rateOf("scripts") / rateOf("raw"));
  for (const Loop& loop : loops) report(line, loop);
  line.field("rounds", static_cast<double>(rounds)).print();
  return 0;
}
