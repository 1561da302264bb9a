// SPDX-License-Identifier: Apache-2.0
// read_admission — a write release admitting R queued readers: R reader processes queue on a
// name a writer holds (acquireReadWaiting, PrimitiveCycles.h), and the writer's one release
// (one script: its result counts the readers it admitted, which must be R) lets them all in.
// Each reader notes when its grant message arrived (it learns there that it was admitted) and
// when it holds (the grant confirmed, where a lock() returns), on CLOCK_MONOTONIC, which is one
// clock for every process on Linux. Per trial the latency is from the release call to the last
// reader's; reported: p50/p99 of both, and of the release call alone, over TRIALS trials (the
// first three, connections and scripts warming up, not counted).
// The coordinator starts a trial once the server shows R waiters (inspectReadWrite), so what is
// timed is the release and the readers' wake-up only. Readers hear from the coordinator over
// pipes, and release their hold before they answer, so the next write is granted at once.
// Usage: dlock_bench_read_admission redis://127.0.0.1:PORT READERS TRIALS
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "BenchReport.h"
#include "Contention.h"
#include "PrimitiveCycles.h"
#include "Workers.h"

namespace {

constexpr const char* kName = "bench:admission";
constexpr int kWarmUpTrials = 3;

using Times = std::array<long long, 2>;  // the grant heard, the hold confirmed (CLOCK_MONOTONIC ns)

void readExactly(int fd, void* data, std::size_t size) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t got = ::read(fd, at, size);
    if (got <= 0) throw std::runtime_error("a pipe closed");
    at += got;
    size -= static_cast<std::size_t>(got);
  }
}

void writeExactly(int fd, const void* data, std::size_t size) {
  if (::write(fd, data, size) != static_cast<ssize_t>(size)) throw std::runtime_error("a pipe write failed");
}

// A reader: per 'g' on `goFd`, one read hold waited for, its times written to `backFd` once released.
int reader(const std::string& uri, int goFd, int backFd) {
  const dlock::bench::Primitives primitives(uri);
  char command = 0;
  while (true) {
    readExactly(goFd, &command, 1);
    if (command != 'g') return 0;
    Times times{};
    const std::string token = dlock::bench::acquireReadWaiting(primitives.readWrite, kName, times[0]);
    times[1] = dlock::bench::nowNanos();
    dlock::bench::releaseRead(primitives.readWrite, kName, token);
    writeExactly(backFd, times.data(), sizeof times);
  }
}

struct Reader {
  pid_t pid = 0;
  int go = -1;    // the coordinator's end
  int back = -1;  // the coordinator's end
};

Reader startReader(const char* program, const std::string& uri) {
  int go[2];
  int back[2];
  // Only the reader's ends cross exec: a reader sees its pipe close when the coordinator ends.
  if (::pipe2(go, O_CLOEXEC) != 0 || ::pipe2(back, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  ::fcntl(go[0], F_SETFD, 0);
  ::fcntl(back[1], F_SETFD, 0);
  Reader started;
  started.pid = dlock::bench::spawnWorker(program, {uri, std::to_string(go[0]), std::to_string(back[1])});
  ::close(go[0]);
  ::close(back[1]);
  started.go = go[1];
  started.back = back[0];
  return started;
}

struct Samples {
  std::vector<double> releaseUs;  // the release call
  std::vector<double> heardUs;    // the release call to the last reader's grant message
  std::vector<double> holdingUs;  // the release call to the last reader holding
  bool admittedAll = true;        // every release admitted R readers, all of them queued
};

// One trial: a write hold, R readers queued behind it, the release timed.
void trial(dlock::IReadWriteOperator& rw, std::vector<Reader>& readers, Samples& samples, bool counted) {
  const std::string writer = dlock::bench::acquireWrite(rw, kName);
  for (const Reader& each : readers) writeExactly(each.go, "g", 1);
  while (rw.inspectReadWrite(kName).waiters.size() < readers.size()) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // outside what is timed
  }
  const long long releasing = dlock::bench::nowNanos();
  const std::uint32_t admitted = dlock::bench::releaseWrite(rw, kName, writer);
  const long long returned = dlock::bench::nowNanos();
  long long lastHeard = 0;
  long long lastHolding = 0;
  bool allQueued = true;
  for (const Reader& each : readers) {
    Times times{};
    readExactly(each.back, times.data(), sizeof times);
    allQueued = allQueued && times[0] != 0;
    lastHeard = std::max(lastHeard, times[0]);
    lastHolding = std::max(lastHolding, times[1]);
  }
  if (!counted) return;
  samples.admittedAll = samples.admittedAll && allQueued && admitted == readers.size();
  samples.releaseUs.push_back(static_cast<double>(returned - releasing) / 1e3);
  samples.heardUs.push_back(static_cast<double>(lastHeard - releasing) / 1e3);
  samples.holdingUs.push_back(static_cast<double>(lastHolding - releasing) / 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 5 && std::string(argv[1]) == "--worker") return reader(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
    if (argc != 4) {
      std::fprintf(stderr, "usage: %s redis://host:port READERS TRIALS\n", argv[0]);
      return 2;
    }
    const std::string uri = argv[1];
    const int readerCount = std::atoi(argv[2]);
    const int trials = std::atoi(argv[3]);
    const dlock::bench::Primitives primitives(uri);
    std::vector<Reader> readers;
    std::vector<pid_t> pids;
    for (int i = 0; i < readerCount; ++i) {
      readers.push_back(startReader(argv[0], uri));
      pids.push_back(readers.back().pid);
    }
    Samples samples;
    for (int i = 0; i < kWarmUpTrials + trials; ++i) trial(primitives.readWrite, readers, samples, i >= kWarmUpTrials);
    for (const Reader& each : readers) {
      writeExactly(each.go, "q", 1);
      ::close(each.go);
      ::close(each.back);
    }
    const bool ok = dlock::bench::waitForWorkers(pids) && samples.admittedAll;
    dlock::bench::JsonLine("read_admission")
        .field("readers", static_cast<double>(readerCount))
        .field("trials", static_cast<double>(trials))
        .field("release_p50_us", dlock::bench::percentile(samples.releaseUs, 50))
        .field("release_p99_us", dlock::bench::percentile(samples.releaseUs, 99))
        .field("last_heard_p50_us", dlock::bench::percentile(samples.heardUs, 50))
        .field("last_heard_p99_us", dlock::bench::percentile(samples.heardUs, 99))
        .field("last_holding_p50_us", dlock::bench::percentile(samples.holdingUs, 50))
        .field("last_holding_p99_us", dlock::bench::percentile(samples.holdingUs, 99))
        .field("one_script", samples.admittedAll)
        .field("ok", ok)
        .print();
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "read_admission: %s\n", error.what());
    return 1;
  }
}
