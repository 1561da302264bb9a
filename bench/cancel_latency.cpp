// SPDX-License-Identifier: Apache-2.0
// cancel_latency — how soon a cancelled wait throws, and what cancellation costs a lock that is
// never cancelled:
//  - latency: a waiter blocked in lock(key, token) on a held key (its pause: a release watch for
//    the default lock, a hand-off watch for the fair one); from requestCancel() to the
//    InterruptedError in the waiter's thread, which includes leaving the fair queue (one round
//    trip). p50/p99/max over `rounds` per kind.
//  - the uncontended cycle with and without a token: server calls per lock+unlock (INFO
//    commandstats: the commands this process sent), which must be the same, and the mean cycle.
// Usage: dlock_bench_cancel_latency URI [rounds] [cycles]
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "RawRedis.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::shared_ptr<dlock::ILock> lockOn(const std::string& uri, bool fair) {
  return dlock::LockBuilder()
      .backend(dlock::connect(uri))
      .waitStrategy(std::make_shared<dlock::NotifyWait>(60s))
      .waiterLease(180s)
      .fair(fair)
      .build();
}

// True while thread `tid` of this process is inside the futex system call (/proc's syscall file:
// its number first).
bool blockedOnFutex(pid_t tid) {
  std::ifstream file("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long number = -1;
  return static_cast<bool>(file >> number) && number == SYS_futex;
}

// Cancel-to-throw latencies (µs) of `rounds` waits, each cancelled in its pause.
std::vector<double> cancelLatencies(const std::string& uri, bool fair, int rounds) {
  auto holder = lockOn(uri, fair);
  auto waiting = lockOn(uri, fair);
  const std::string key = fair ? "bench:cancel:fair" : "bench:cancel";
  holder->lock(key);
  std::vector<double> latencies;
  for (int round = 0; round < rounds; ++round) {
    dlock::CancelSource stop;
    Clock::time_point thrown;
    const std::uint64_t before = waiting->stats().attempts;
    std::atomic<pid_t> tid{0};
    std::thread waiter([&] {
      tid.store(static_cast<pid_t>(::syscall(SYS_gettid)));
      try {
        waiting->lock(key, stop.token());
      } catch (const dlock::InterruptedError&) {
        thrown = Clock::now();
      }
    });
    // In its pause: it has tried, and its thread is blocked on a futex (the pause's condition
    // variable; a round trip blocks in poll instead), whatever number of tries led there.
    while (tid.load() == 0 || waiting->stats().attempts == before || !blockedOnFutex(tid.load())) {
      std::this_thread::yield();
    }
    const Clock::time_point cancelled = Clock::now();
    stop.requestCancel();
    waiter.join();
    latencies.push_back(std::chrono::duration<double, std::micro>(thrown - cancelled).count());
  }
  holder->unlock(key);
  return latencies;
}

struct Cycle {
  double callsPerCycle = 0;
  double meanUs = 0;
};

Cycle uncontended(dlock::bench::RawRedis& admin, dlock::ILock& lock, const dlock::CancelToken* token, int cycles) {
  const auto callsBefore = admin.commandCalls();
  const auto start = Clock::now();
  for (int i = 0; i < cycles; ++i) {
    if (token != nullptr) {
      lock.lock("bench:cycle", *token);
    } else {
      lock.lock("bench:cycle");
    }
    lock.unlock("bench:cycle");
  }
  const double seconds = dlock::bench::secondsSince(start);
  const auto callsAfter = admin.commandCalls();
  // What the client sent (as Contention.h counts): not the calls scripts make inside EVALSHA.
  const long long calls = dlock::bench::RawRedis::clientCommands(callsAfter) - dlock::bench::RawRedis::clientCommands(callsBefore);
  return {static_cast<double>(calls) / cycles, seconds * 1e6 / cycles};
}

Cycle medianCycle(std::vector<Cycle> rounds) {
  std::sort(rounds.begin(), rounds.end(), [](const Cycle& a, const Cycle& b) { return a.meanUs < b.meanUs; });
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s redis://host:port [rounds] [cycles]\n", argv[0]);
    return 2;
  }
  const std::string uri = argv[1];
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 1000;
  const int cycles = argc > 3 ? std::atoi(argv[3]) : 20000;

  for (const bool fair : {false, true}) {
    const std::vector<double> latencies = cancelLatencies(uri, fair, rounds);
    dlock::bench::JsonLine("cancel_latency")
        .field("kind", std::string(fair ? "fair" : "default"))
        .field("rounds", static_cast<double>(rounds))
        .field("p50_us", dlock::bench::percentile(latencies, 50))
        .field("p99_us", dlock::bench::percentile(latencies, 99))
        .field("max_us", dlock::bench::percentile(latencies, 100))
        .print();
  }

  dlock::bench::RawRedis admin(uri);
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(30s).build();
  dlock::CancelSource never;
  const dlock::CancelToken token = never.token();
  (void)uncontended(admin, *lock, nullptr, cycles / 10);  // warm-up: connections, scripts
  // Alternating rounds, the median of each: the machine's drift hits both alike.
  std::vector<Cycle> plainRounds;
  std::vector<Cycle> tokenRounds;
  for (int round = 0; round < 5; ++round) {
    plainRounds.push_back(uncontended(admin, *lock, nullptr, cycles / 5));
    tokenRounds.push_back(uncontended(admin, *lock, &token, cycles / 5));
  }
  const Cycle plain = medianCycle(plainRounds);
  const Cycle withToken = medianCycle(tokenRounds);
  dlock::bench::JsonLine("cancel_uncontended_cycle")
      .field("cycles", static_cast<double>(cycles))
      .field("calls_per_cycle", plain.callsPerCycle)
      .field("calls_per_cycle_with_token", withToken.callsPerCycle)
      .field("mean_us", plain.meanUs)
      .field("mean_us_with_token", withToken.meanUs)
      .print();
  return 0;
}
