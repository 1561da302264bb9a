// SPDX-License-Identifier: Apache-2.0
// The read-write lock (ReadWriteLock) on a real redis-server: 8 processes of readers and writers
// with an unfenced "inside" flag on the server (writers exclude everyone, readers overlap), a
// writer's wait while readers arrive all the time, the curator#1138 downgrade sequence, and an
// upgrade attempt refused at once.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// One hold as a worker logged it (TestWorker.cpp, "readwrite").
struct HoldLine {
  char side = 'r';
  long long own = 0;    // holders of its side inside, itself included
  long long other = 0;  // holders of the other side inside
  long long waitMicros = 0;
  long long holdMicros = 0;
  long long unlockMicros = 0;
};

struct Run {
  std::vector<HoldLine> holds;
  long long longestRead = 0;    // µs, from holding to unlocked
  long long longestUnlock = 0;  // µs: the slowest release round trip seen under this load
};

// `readers` and `writers` worker processes on `key` of `server`, each hold `holdMillis`; each
// writer writes `writes` times, readers go on until every writer is done.
Run runWorkers(const RedisProcess& server, int readers, int writers, int holdMillis, int writes) {
  RedisClient client(server.host(), server.port());
  (void)client.ok({"DEL", "stop", "readers", "writers"});
  const std::string out = "/tmp/dlock-test-" + std::to_string(::getpid()) + "-readwrite";
  std::remove(out.c_str());
  auto spawn = [&](const char* role) {
    return std::make_unique<ChildProcess>(std::vector<std::string>{DLOCK_TEST_WORKER, "readwrite", server.uri(), "rw-key",
                                                                   role, std::to_string(holdMillis),
                                                                   std::to_string(writes), out});
  };
  std::vector<std::unique_ptr<ChildProcess>> readerProcesses;
  std::vector<std::unique_ptr<ChildProcess>> writerProcesses;
  for (int i = 0; i < readers; ++i) readerProcesses.push_back(spawn("reader"));
  for (int i = 0; i < writers; ++i) writerProcesses.push_back(spawn("writer"));
  for (auto& writer : writerProcesses) CHECK(writer->wait() == 0);
  (void)client.ok({"SET", "stop", "1"});
  for (auto& reader : readerProcesses) CHECK(reader->wait() == 0);
  Run run;
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    HoldLine hold;
    fields >> hold.side >> hold.own >> hold.other >> hold.waitMicros >> hold.holdMicros >> hold.unlockMicros;
    run.holds.push_back(hold);
    if (hold.side == 'r') run.longestRead = std::max(run.longestRead, hold.holdMicros);
    run.longestUnlock = std::max(run.longestUnlock, hold.unlockMicros);
  }
  std::remove(out.c_str());
  return run;
}

struct RwServer {
  RedisProcess server;
  std::shared_ptr<dlock::ReadWriteLock> rw =
      dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(30s).buildReadWrite();
};

// Joins a thread when the scope ends.
struct Joined {
  std::thread& thread;
  ~Joined() {
    if (thread.joinable()) thread.join();
  }
};

// Returns once `count` waiters are queued for `key` (the event a queued writer is).
void awaitWaiters(dlock::ReadWriteLock& rw, const std::string& key, std::size_t count) {
  REQUIRE(dlock::test::eventually([&] { return rw.inspect(key).waiters.size() == count; }, dlock::test::kEventBudget));
}

}  // namespace

TEST_SUITE("ReadWriteLockOnRedis") {
  TEST_CASE("8 processes: a writer inside never overlaps another holder, and readers overlap") {
    RedisProcess server;
    const Run run = runWorkers(server, 5, 3, 5, 10);
    long long writes = 0;
    long long mostReaders = 0;
    for (const HoldLine& hold : run.holds) {
      if (hold.side == 'w') {
        ++writes;
        CHECK(hold.own == 1);    // no other writer inside
        CHECK(hold.other == 0);  // no reader inside
      } else {
        CHECK(hold.other == 0);  // no writer inside
        mostReaders = std::max(mostReaders, hold.own);
      }
    }
    CHECK(writes == 30);
    CHECK(mostReaders > 1);
    MESSAGE("holds: " << run.holds.size() << ", most readers inside at once: " << mostReaders);
  }

  TEST_CASE("with readers arriving all the time, a waiting writer gets in within the longest read + 3 round trips") {
    RedisProcess server;
    const Run run = runWorkers(server, 7, 1, 20, 10);
    long long longestWriterWait = 0;
    long long reads = 0;
    for (const HoldLine& hold : run.holds) {
      if (hold.side == 'w') longestWriterWait = std::max(longestWriterWait, hold.waitMicros);
      if (hold.side == 'r') ++reads;
    }
    const long long bound = run.longestRead + 3 * run.longestUnlock;
    MESSAGE("reads " << reads << ", longest writer wait " << longestWriterWait << " us, longest read "
                     << run.longestRead << " us, slowest round trip " << run.longestUnlock << " us, bound " << bound
                     << " us");
    CHECK(reads > 10);
    CHECK(longestWriterWait <= bound);
  }

  TEST_CASE("write, read, release the write: a queued writer does not get in before the read ends (curator#1138)") {
    RwServer f;
    auto r = f.rw->readLock();
    auto w = f.rw->writeLock();
    REQUIRE(w->tryLock("k"));
    std::atomic<bool> got{false};
    std::thread other([&] {
      auto otherRw = dlock::LockBuilder().backend(dlock::connect(f.server.uri())).leaseTime(30s).buildReadWrite();
      if (otherRw->writeLock()->tryLock("k", 30s)) {
        got = true;
        otherRw->writeLock()->unlock("k");
      }
    });
    const Joined joined{other};  // also when a check below throws
    awaitWaiters(*f.rw, "k", 1);
    REQUIRE(r->tryLock("k"));
    w->unlock("k");  // the downgrade
    const dlock::ReadWriteInfo info = f.rw->inspect("k");
    CHECK_FALSE(info.writer);
    CHECK(info.readers.size() == 1);
    CHECK(info.waiters.size() == 1);
    CHECK_FALSE(got.load());
    CHECK(r->isHeld("k"));
    CHECK_NOTHROW(r->unlock("k"));
    other.join();
    CHECK(got.load());
  }

  TEST_CASE("a reader asking for the write lock gets UpgradeError in under 1 ms, tryUpgrade works for the sole reader") {
    RwServer f;
    REQUIRE(f.rw->readLock()->tryLock("k"));
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(f.rw->writeLock()->lock("k"), dlock::UpgradeError);
    const auto took = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    MESSAGE("UpgradeError after " << took.count() << " us");
    CHECK(took < 1ms);
    REQUIRE(f.rw->tryUpgrade("k"));
    CHECK(f.rw->inspect("k").writer);
    f.rw->writeLock()->unlock("k");
    CHECK(f.rw->inspect("k").readers.size() == 1);
    f.rw->readLock()->unlock("k");
    CHECK(f.rw->inspect("k").readers.empty());
  }
}
