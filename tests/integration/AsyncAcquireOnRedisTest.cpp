// SPDX-License-Identifier: Apache-2.0
// acquireAsync (dlock/async.h) against a real redis-server: pending acquires woken by release
// messages, many of them on a constant number of threads, cancels and close() leaving no key.
#include <doctest/doctest.h>

#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "Eventually.h"
#include "AsyncScenarios.h"
#include "ExceptionPtrTsan.h"
#include "ForkedChild.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/LockError.h"
#include "dlock/async.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::AcquireOptions;
using dlock::Lease;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

AcquireOptions waitingAtMost(std::chrono::milliseconds wait) {
  AcquireOptions options;
  options.waitTime = wait;
  return options;
}

// The dlock keys holding a lease on the server (fences and records aside).
long long heldKeys(RedisClient& client, int keys) {
  long long held = 0;
  for (int k = 0; k < keys; ++k) held += client.ok({"EXISTS", "dlock:{async:" + std::to_string(k) + "}"}).integer;
  return held;
}

#if DLOCK_TEST_FORK_WITH_THREADS
// One process of the multi-process case: `pending` acquires on the parent's held keys, half
// cancelled at random before it says `ready` on `readyFd`, the rest completing once the parent
// releases. 0 when each completed once as it should on a constant thread count; else which
// check failed (1-5).
int pendingInChild(const std::string& uri, int child, int pending, int keys, int readyFd) {
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).build();
  lock->acquire("async:child:" + std::to_string(child)).release();  // the watchdog runs
  if (lock->acquireAsync("async:warm-up", waitingAtMost(50ms)).get()) return 1;  // the subscriber runs
  const std::size_t before = dlock::test::threadCount();
  dlock::test::Completions completions;
  std::vector<std::atomic<int>> calls(static_cast<std::size_t>(pending));
  std::vector<dlock::CancelSource> cancels(static_cast<std::size_t>(pending));
  const dlock::test::ClosesAtExit closing(*lock);
  for (int i = 0; i < pending; ++i) {
    AcquireOptions options;
    options.cancel = cancels[static_cast<std::size_t>(i)].token();
    lock->acquireAsync("async:" + std::to_string(i % keys), options, [&, i](Lease lease, std::exception_ptr error) {
      calls[static_cast<std::size_t>(i)].fetch_add(1);
      const bool held = static_cast<bool>(lease);
      lease = Lease();
      completions.record(held, error != nullptr, false);
    });
  }
  std::mt19937 random(static_cast<unsigned>(child) + 1);
  std::vector<int> order(static_cast<std::size_t>(pending));
  for (int i = 0; i < pending; ++i) order[static_cast<std::size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), random);
  const auto cancelled = static_cast<std::size_t>(pending / 2);
  for (std::size_t i = 0; i < cancelled; ++i) cancels[static_cast<std::size_t>(order[i])].requestCancel();
  if (!completions.waitFor(cancelled, 120s) || completions.held() != 0) return 2;
  if (::write(readyFd, "r", 1) != 1) return 3;
  if (!completions.waitFor(static_cast<std::size_t>(pending), 120s)) return 4;
  bool once = true;
  for (const auto& count : calls) once = once && count.load() == 1;
  const bool right = completions.interrupted() == cancelled &&
                     completions.held() == static_cast<std::size_t>(pending) - cancelled;
  return once && right && dlock::test::threadCount() == before ? 0 : 5;
}
#endif

}  // namespace

TEST_SUITE("AsyncAcquireOnRedis") {
#if DLOCK_TEST_FORK_WITH_THREADS
  TEST_CASE("10000 pending acquires over 4 processes and 100 keys: constant threads, each completes once, no key left") {
    constexpr int kProcesses = 4;
    constexpr int kKeys = 100;
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    std::vector<Lease> holds;
    for (int k = 0; k < kKeys; ++k) holds.push_back(holder->acquire("async:" + std::to_string(k)));
    Lease warmUp = holder->acquire("async:warm-up");
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    std::vector<std::unique_ptr<dlock::test::ForkedChild>> children;
    for (int child = 0; child < kProcesses; ++child) {
      children.push_back(std::make_unique<dlock::test::ForkedChild>(
          [&, child] { return pendingInChild(server.uri(), child, 2500, kKeys, ready[1]); }));
    }
    ::close(ready[1]);
    int readyChildren = 0;
    pollfd waiting{ready[0], POLLIN, 0};
    char byte = 0;
    // Each child says ready once its cancels completed (a child that dies closes its end: EOF).
    while (readyChildren < kProcesses && ::poll(&waiting, 1, 120000) == 1 && ::read(ready[0], &byte, 1) == 1) {
      ++readyChildren;
    }
    ::close(ready[0]);
    REQUIRE(readyChildren == kProcesses);
    holds.clear();  // the keys go to the children's pending acquires, one after another
    for (auto& child : children) CHECK(child->exitStatus(120s) == 0);
    CHECK(heldKeys(client, kKeys) == 0);
  }
#endif


  TEST_CASE("a pending acquire is woken by the holder's release from another lock") {
    RedisProcess server;
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    CHECK(pending.wait_for(0ms) == std::future_status::timeout);
    held.release();
    Lease lease = pending.get();
    REQUIRE(lease);
    CHECK(lease.isHeld());
  }

  TEST_CASE("a wait that runs out completes with an empty lease, as the sync acquire returns") {
    RedisProcess server;
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    Lease held = lock->acquire("job");
    CHECK_FALSE(lock->acquire("job", waitingAtMost(50ms)));
    CHECK_FALSE(lock->acquireAsync("job", waitingAtMost(50ms)).get());
    CHECK(held.isHeld());
  }

  TEST_CASE("close() completes pending acquires with InterruptedError, leaving no key behind") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    Lease held = holder->acquire("async:0");
    std::vector<std::future<Lease>> pending;
    for (int i = 0; i < 100; ++i) pending.push_back(lock->acquireAsync("async:0"));
    lock->close();
    for (auto& future : pending) CHECK_THROWS_AS(future.get(), dlock::InterruptedError);
    held.release();
    CHECK(heldKeys(client, 1) == 0);
  }

  TEST_CASE("2000 pending acquires over 100 keys: constant threads, each completes once, cancelled ones hold nothing") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    dlock::test::checkManyPendingAcquires(*lock, *holder, 2000, 100, 120s);
    CHECK(heldKeys(client, 100) == 0);
  }
}

namespace {

long long queueLength(RedisClient& client, const std::string& key) {
  return client.ok({"LLEN", "dlock:{" + key + "}:fair:queue"}).integer;
}


std::shared_ptr<dlock::ILock> fairLock(const RedisProcess& server) {
  return dlock::LockBuilder().backend(dlock::connect(server.uri())).fair().build();
}

}  // namespace

TEST_SUITE("AsyncAcquireFairOnRedis") {
  TEST_CASE("a fair lock's pending async acquire gets the key once the holder releases") {
    RedisProcess server;
    auto holder = fairLock(server);
    auto lock = fairLock(server);
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    CHECK(pending.wait_for(0ms) == std::future_status::timeout);
    held.release();
    CHECK(pending.get());
  }

  // The hand-off message wakes it (no backstop or renewal comes within the 30 s bound's start),
  // and its place is the queue's head, ahead of a sync waiter of another process's lock.
  TEST_CASE("an async waiter holds its place in the fair queue: handed the key before a sync waiter queued after it") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = fairLock(server);
    auto lock = fairLock(server);
    auto other = fairLock(server);
    Lease held = holder->acquire("job");
    std::atomic<bool> asyncHeld{false};
    std::atomic<bool> syncFirst{false};
    std::promise<void> asyncDone;
    lock->acquireAsync("job", {}, [&](Lease lease, std::exception_ptr error) {
      if (!error && lease) asyncHeld = true;
      lease.release();
      asyncDone.set_value();
    });
    REQUIRE(eventually([&] { return queueLength(client, "job") == 1; }));
    std::thread sync([&] {
      Lease lease = other->acquire("job");
      if (!asyncHeld) syncFirst = true;
    });
    const bool queued = eventually([&] { return queueLength(client, "job") == 2; });
    held.release();
    asyncDone.get_future().get();
    sync.join();
    CHECK(queued);
    CHECK(asyncHeld);
    CHECK_FALSE(syncFirst);
  }

  TEST_CASE("a cancelled async fair waiter has left the queue when it completes") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = fairLock(server);
    auto lock = fairLock(server);
    Lease held = holder->acquire("job");
    dlock::CancelSource cancel;
    AcquireOptions options;
    options.cancel = cancel.token();
    auto pending = lock->acquireAsync("job", options);
    REQUIRE(eventually([&] { return queueLength(client, "job") == 1; }));
    cancel.requestCancel();
    CHECK_THROWS_AS(pending.get(), dlock::InterruptedError);
    CHECK(queueLength(client, "job") == 0);
  }

  // Its place's renewal is in flight, unanswered, at the wait's end: the operation ends then, not
  // after the 30 s command timeout, and its place is left once the server answers again.
  TEST_CASE("an async fair waiter whose server pauses with its renewal in flight completes at its deadline") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const std::string uri = server.uri() + "?command_timeout=30s";
    auto holder = dlock::LockBuilder().backend(dlock::connect(uri)).fair().build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).fair().waiterLease(300ms).build();
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job", waitingAtMost(1500ms));
    REQUIRE(eventually([&] { return queueLength(client, "job") == 1; }));
    const auto paused = std::chrono::steady_clock::now();
    server.pause();  // the next renewal, within 100 ms, waits for an answer
    const auto status = pending.wait_for(20s);
    const auto waited = std::chrono::steady_clock::now() - paused;
    server.resume();
    REQUIRE(status == std::future_status::ready);
    CHECK(waited < 10s);
    CHECK_THROWS_AS(pending.get(), dlock::ConnectionError);  // the outage lasted to the deadline
    held.release();
    CHECK(eventually([&] { return queueLength(client, "job") == 0; }));  // left, by the cleanup lane
  }

  TEST_CASE("1000 async fair waiters on 10 keys: each key goes to its waiters in the order they queued") {
    RedisProcess server;
    auto holder = fairLock(server);
    auto lock = fairLock(server);
    RedisClient client(server.host(), server.port());
    constexpr int kKeys = 10;
    constexpr int kPerKey = 100;
    std::vector<Lease> held;
    for (int k = 0; k < kKeys; ++k) held.push_back(holder->acquire("fifo:" + std::to_string(k)));
    std::mutex mutex;
    std::vector<std::vector<int>> order(kKeys);
    dlock::test::Completions completions;
    for (int i = 0; i < kPerKey; ++i) {
      for (int k = 0; k < kKeys; ++k) {
        const std::string key = "fifo:" + std::to_string(k);
        lock->acquireAsync(key, {}, [&, i, k](Lease lease, std::exception_ptr error) {
          {
            std::lock_guard<std::mutex> guard(mutex);
            if (lease) order[static_cast<std::size_t>(k)].push_back(i);
          }
          const bool ok = static_cast<bool>(lease);
          lease = Lease();  // handed to the next in the queue
          completions.record(ok, error != nullptr, false);
        });
        // Queued in this order: each joins before the next starts.
        REQUIRE(eventually([&] { return queueLength(client, key) == i + 1; }));
      }
    }
    held.clear();
    REQUIRE(completions.waitFor(static_cast<std::size_t>(kKeys * kPerKey), 120s));
    CHECK(completions.held() == static_cast<std::size_t>(kKeys * kPerKey));
    std::vector<int> expected(kPerKey);
    for (int i = 0; i < kPerKey; ++i) expected[static_cast<std::size_t>(i)] = i;
    for (const auto& keyOrder : order) CHECK(keyOrder == expected);
  }
}

TEST_SUITE("AsyncReadWriteOnRedis") {
  // A read-write lock's async waiters hold places in the name's queue on the server, as its sync
  // ones do, woken by their own hand-off messages.
  TEST_CASE("an async writer behind a reader, and an async reader behind it: each gets in, in order, and a cancel leaves the queue") {
    RedisProcess server;
    auto backend = dlock::connect(server.uri());
    auto& rwOperator = dynamic_cast<dlock::IReadWriteOperator&>(*backend);
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).buildReadWrite();
    auto rw = dlock::LockBuilder().backend(backend).buildReadWrite();
    const auto waiting = [&] { return rwOperator.inspectReadWrite("doc").waiters.size(); };
    Lease read = holder->readLock()->acquire("doc");
    std::promise<std::size_t> readersBesideWrite;
    rw->writeLock()->acquireAsync("doc", {}, [&](Lease lease, std::exception_ptr error) {
      readersBesideWrite.set_value(error || !lease ? 99 : rwOperator.inspectReadWrite("doc").readers.size());
      lease = Lease();
    });
    REQUIRE(eventually([&] { return waiting() == 1; }));
    auto reader = rw->readLock()->acquireAsync("doc");
    dlock::CancelSource cancel;
    AcquireOptions options;
    options.cancel = cancel.token();
    auto cancelled = rw->readLock()->acquireAsync("doc", options);
    REQUIRE(eventually([&] { return waiting() == 3; }));
    cancel.requestCancel();
    CHECK_THROWS_AS(cancelled.get(), dlock::InterruptedError);
    CHECK(waiting() == 2);
    read.release();
    auto beside = readersBesideWrite.get_future();
    REQUIRE(beside.wait_for(30s) == std::future_status::ready);
    CHECK(beside.get() == 0);
    REQUIRE(reader.wait_for(30s) == std::future_status::ready);
    CHECK(reader.get().isHeld());
  }
}

