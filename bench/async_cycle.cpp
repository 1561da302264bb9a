// SPDX-License-Identifier: Apache-2.0
// async_cycle — acquireAsync (dlock/async.h) against the sync acquire, in the same run:
//  - the uncontended cycle (acquire, release) of one client, sync and async (the future's get()),
//    rounds alternating so drift in the machine's load hits both alike; p50/p99 of each;
//  - the threads of this process with N acquires pending on held keys (/proc/self/task), for
//    several N, the process's CPU while they wait (nothing released), and how long cancelling
//    all N took.
// Usage: dlock_bench_async_cycle URI [rounds] [seconds-per-round]
#include <dirent.h>
#include <time.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "dlock/async.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

namespace {

using Clock = std::chrono::steady_clock;

std::size_t threadCount() {
  std::size_t count = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  while (const dirent* entry = ::readdir(tasks)) count += entry->d_name[0] != '.' ? 1 : 0;
  ::closedir(tasks);
  return count;
}

double processCpuMs() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

void runRound(double seconds, const std::function<void()>& cycle, std::vector<double>& latenciesUs) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    const auto t0 = Clock::now();
    cycle();
    latenciesUs.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
}

void uncontended(dlock::ILock& lock, int rounds, double seconds) {
  std::vector<double> sync;
  std::vector<double> async;
  auto syncCycle = [&] { lock.acquire("bench:async-cycle").release(); };
  auto asyncCycle = [&] { lock.acquireAsync("bench:async-cycle").get().release(); };
  for (int round = 0; round < rounds; ++round) {
    runRound(seconds, syncCycle, sync);
    runRound(seconds, asyncCycle, async);
  }
  using dlock::bench::percentile;
  dlock::bench::JsonLine("async_uncontended_cycle")
      .field("sync_p50_us", percentile(sync, 50))
      .field("sync_p99_us", percentile(sync, 99))
      .field("async_p50_us", percentile(async, 50))
      .field("async_p99_us", percentile(async, 99))
      .field("sync_cycles", static_cast<double>(sync.size()))
      .field("async_cycles", static_cast<double>(async.size()))
      .print();
}

void pending(dlock::ILock& lock, dlock::ILock& holder, int count, int keys) {
  std::vector<dlock::Lease> holds;
  for (int k = 0; k < keys; ++k) holds.push_back(holder.acquire("bench:pending:" + std::to_string(k)));
  const std::size_t before = threadCount();
  dlock::CancelSource cancel;
  dlock::AcquireOptions options;
  options.cancel = cancel.token();
  std::vector<std::future<dlock::Lease>> waiting;
  waiting.reserve(static_cast<std::size_t>(count));
  const auto started = Clock::now();
  for (int i = 0; i < count; ++i) waiting.push_back(lock.acquireAsync("bench:pending:" + std::to_string(i % keys), options));
  const double startUs = std::chrono::duration<double, std::micro>(Clock::now() - started).count();
  const std::size_t during = threadCount();
  // The process's CPU while they wait: the first tries are over (each key's watch made) after
  // the settle; then nothing happens on the server, so what is spent is the waiting itself.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double cpuBefore = processCpuMs();
  const auto idleFrom = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double idleCpuMsPerS = (processCpuMs() - cpuBefore) /
                               std::chrono::duration<double>(Clock::now() - idleFrom).count();
  const auto cancelling = Clock::now();
  cancel.requestCancel();
  int interrupted = 0;
  for (auto& future : waiting) {
    try {
      (void)future.get();
    } catch (const dlock::InterruptedError&) {
      ++interrupted;
    }
  }
  const double cancelMs = std::chrono::duration<double, std::milli>(Clock::now() - cancelling).count();
  dlock::bench::JsonLine("async_pending")
      .field("pending", static_cast<double>(count))
      .field("keys", static_cast<double>(keys))
      .field("threads_before", static_cast<double>(before))
      .field("threads_pending", static_cast<double>(during))
      .field("start_all_us", startUs)
      .field("idle_cpu_ms_per_s", idleCpuMsPerS)
      .field("cancel_all_ms", cancelMs)
      .field("interrupted", static_cast<double>(interrupted))
      .print();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s URI [rounds] [seconds-per-round]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 1.0;
  auto lock = dlock::LockBuilder().backend(dlock::connect(argv[1])).build();
  auto holder = dlock::LockBuilder().backend(dlock::connect(argv[1])).build();
  lock->acquireAsync("bench:warm-up").get().release();  // starts the lock's threads before counting
  uncontended(*lock, rounds, seconds);
  for (const int count : {1, 100, 1000, 2000, 10000}) pending(*lock, *holder, count, 100);
  return 0;
}
