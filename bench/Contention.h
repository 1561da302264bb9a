// SPDX-License-Identifier: Apache-2.0
// Contention.h — the contended benchmarks' run (handoff, fair_handoff): P worker processes each
// doing locked read-modify-write increments (GET then SET) of a Redis counter on one key, and the
// merge of what they recorded.
// The timed window is steady state only: each worker takes the key once before it opens
// (connections, scripts, subscriptions: the first lock() of P processes at once is slow), records
// the cycles it starts before the window closes, and goes on cycling for a drain time after, so
// that its last recorded waits are served by live peers, not by processes tearing down. The
// coordinator reads the server's counters at the window's edges.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "RawRedis.h"
#include "Workers.h"
#include "dlock/ILock.h"

namespace dlock::bench {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: comparable across processes

inline long long nowNanos() { return Clock::now().time_since_epoch().count(); }

inline void sleepUntilNanos(long long at) { std::this_thread::sleep_until(Clock::time_point(Clock::duration(at))); }

struct Window {
  long long start = 0;  // CLOCK_MONOTONIC ns
  long long end = 0;
  long long drainEnd = 0;
};

// Opens once every worker could connect and warm up; the drain outlasts any wait in the window.
inline Window windowFor(int processes, double seconds) {
  Window window;
  window.start = nowNanos() + 500'000'000 + 20'000'000LL * processes;
  window.end = window.start + static_cast<long long>(seconds * 1e9);
  window.drainEnd = window.end + 500'000'000;
  return window;
}

struct Record {
  long long requested = 0;  // lock() called
  long long acquired = 0;   // lock() returned
  long long releasing = 0;  // unlock() called
  long long released = 0;   // unlock() returned
  long long timed = 0;      // 1: requested inside the window
};

// One worker's cycles, each `acquire()`, `work()` and `release()` timed as a Record: one cycle
// before the window opens (warm-up, not recorded), then cycles until the drain ends.
template <class Acquire, class Work, class Release>
std::vector<Record> runCyclesOf(const Window& window, Acquire&& acquire, Work&& work, Release&& release) {
  std::vector<Record> records;
  records.reserve(1 << 16);
  acquire();  // warm-up: connections, scripts, subscriptions
  release();
  sleepUntilNanos(window.start);
  while (nowNanos() < window.drainEnd) {
    Record record;
    record.requested = nowNanos();
    record.timed = record.requested < window.end ? 1 : 0;
    acquire();
    record.acquired = nowNanos();
    work();
    record.releasing = nowNanos();
    release();
    record.released = nowNanos();
    records.push_back(record);
  }
  return records;
}

// The workload under a lock: a read-modify-write increment of `counterKey` (GET, then SET).
inline void incrementCounter(RawRedis& data, const std::string& counterKey) {
  const std::string seen = data.text({"GET", counterKey});
  const long long value = seen.empty() || seen == "0" ? 0 : std::atoll(seen.c_str());
  data.command({"SET", counterKey, std::to_string(value + 1)});
}

// One worker's cycles on `key`, incrementing `counterKey` under the lock (not in the warm-up).
inline std::vector<Record> runCycles(ILock& lock, RawRedis& data, const std::string& key, const std::string& counterKey,
                                     const Window& window) {
  return runCyclesOf(
      window, [&] { lock.lock(key); }, [&] { incrementCounter(data, counterKey); }, [&] { lock.unlock(key); });
}

inline void writeRecords(const std::string& path, const std::vector<Record>& records) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(records.data()),
             static_cast<std::streamsize>(records.size() * sizeof(Record)));
}

struct Acquisition {
  Record record;
  int worker = 0;
};

struct Merged {
  std::vector<Acquisition> timed;  // requested inside the window, by acquisition time
  long long cycles = 0;            // every increment, the warm-up's and drain's cycles included
};

// Reads and removes each worker's file (worker i wrote files[i]).
inline Merged mergeRecords(const std::vector<std::string>& files) {
  Merged merged;
  for (std::size_t p = 0; p < files.size(); ++p) {
    std::ifstream in(files[p], std::ios::binary);
    Record record;
    while (in.read(reinterpret_cast<char*>(&record), sizeof record)) {
      ++merged.cycles;
      if (record.timed != 0) merged.timed.push_back({record, static_cast<int>(p)});
    }
    std::remove(files[p].c_str());
  }
  std::sort(merged.timed.begin(), merged.timed.end(),
            [](const Acquisition& a, const Acquisition& b) { return a.record.acquired < b.record.acquired; });
  return merged;
}

// Where a wait's length came from: the acquisitions by other processes during it (its turns; a
// FIFO allows P - 1, plus one granted while the request was on its way) and how many of those were
// by a process that asked after it did (it was overtaken: it lost a wake-up, or its place).
struct WaitTurns {
  std::vector<double> turns;      // per acquisition of `timed`, in its order
  std::vector<double> overtaken;  // of which by later requests
};

inline WaitTurns waitTurns(const std::vector<Acquisition>& timed) {
  WaitTurns result;
  result.turns.reserve(timed.size());
  result.overtaken.reserve(timed.size());
  for (std::size_t i = 0; i < timed.size(); ++i) {
    const Record& mine = timed[i].record;
    const auto end = timed.begin() + static_cast<std::ptrdiff_t>(i);
    const auto first = std::lower_bound(timed.begin(), end, mine.requested,
                                        [](const Acquisition& a, long long at) { return a.record.acquired < at; });
    result.turns.push_back(static_cast<double>(end - first));
    result.overtaken.push_back(static_cast<double>(
        std::count_if(first, end, [&](const Acquisition& a) { return a.record.requested > mine.requested; })));
  }
  return result;
}

// A contended run as the coordinator sees it: the workers' merged records and what the server
// did over the window.
struct ContendedRun {
  Merged merged;
  double serverCpuUs = 0;  // the server's CPU time over the window
  double scriptUs = 0;     // of which inside scripts
  // Commands the lock's clients sent in the window: not the calls scripts make inside EVALSHA,
  // nor the workload's GET and SET.
  long long lockCommands = 0;
  bool workersOk = false;
};

// Starts `processes` workers (`program --worker URI ARG START END DRAIN-END FILE`), reads the
// server's counters at the window's edges, waits for the workers and merges what they recorded.
inline ContendedRun runContended(const char* program, const std::string& uri, const std::string& arg, int processes,
                                 double seconds) {
  RawRedis admin(uri);
  const Window window = windowFor(processes, seconds);
  char dirTemplate[] = "/tmp/dlock-bench-XXXXXX";
  const std::string dir = ::mkdtemp(dirTemplate);
  std::vector<pid_t> pids;
  std::vector<std::string> files;
  for (int p = 0; p < processes; ++p) {
    files.push_back(dir + "/worker-" + std::to_string(p));
    pids.push_back(spawnWorker(program, {uri, arg, std::to_string(window.start), std::to_string(window.end),
                                         std::to_string(window.drainEnd), files.back()}));
  }
  sleepUntilNanos(window.start);
  const RawRedis::ServerCost costBefore = admin.serverCost();
  auto callsBefore = admin.commandCalls();
  sleepUntilNanos(window.end);
  const RawRedis::ServerCost costAfter = admin.serverCost();
  auto callsAfter = admin.commandCalls();
  ContendedRun run;
  run.workersOk = waitForWorkers(pids);
  run.merged = mergeRecords(files);
  ::rmdir(dir.c_str());
  run.serverCpuUs = costAfter.cpuUs - costBefore.cpuUs;
  run.scriptUs = costAfter.scriptUs - costBefore.scriptUs;
  run.lockCommands = RawRedis::clientCommands(callsAfter) - RawRedis::clientCommands(callsBefore);
  return run;
}

// A worker's window, from its argv[4..6].
inline Window windowOf(char** argv) { return Window{std::atoll(argv[4]), std::atoll(argv[5]), std::atoll(argv[6])}; }

}  // namespace dlock::bench
