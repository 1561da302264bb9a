// SPDX-License-Identifier: Apache-2.0
// The read-write lock's and the semaphore's waits against a real redis-server: a cancelled read,
// write or permit wait ends at once and leaves no queue entry; close() of a ReadWriteLock wakes
// its reader and writer; a destroyed one frees its read and write keys at once; PermitLease::extend
// moves the permits' lease on the server.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "RedisProcess.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisProcess;
using Steady = std::chrono::steady_clock;

namespace {

// A waiter's place lasts three minutes unrenewed: a pause a cancel or close() does not wake shows.
std::shared_ptr<dlock::ReadWriteLock> rwOn(const RedisProcess& server) {
  return dlock::LockBuilder().backend(dlock::connect(server.uri())).waiterLease(180s).buildReadWrite();
}

std::shared_ptr<dlock::Semaphore> semaphoreOn(const RedisProcess& server, std::optional<std::chrono::milliseconds> lease) {
  dlock::SemaphoreBuilder builder;
  builder.backend(dlock::connect(server.uri())).name("cap").permits(2).waiterLease(180s);
  if (lease) builder.leaseTime(*lease);
  return builder.build();
}

// What a wait run by std::async came to: "interrupted", "acquired", "timed out" or an error.
using Outcome = std::future<std::string>;

template <class Wait>
Outcome waitOn(Wait wait) {
  return std::async(std::launch::async, [wait] {
    try {
      return std::string(wait() ? "acquired" : "timed out");
    } catch (const dlock::InterruptedError&) {
      return std::string("interrupted");
    } catch (const std::exception& error) {
      return std::string(error.what());
    }
  });
}

// The outcome within 5 s; otherwise `unblock` ends the wait (so the test fails, not hangs).
std::string within5s(Outcome& outcome, const std::function<void()>& unblock) {
  if (outcome.wait_for(5s) != std::future_status::ready) {
    unblock();
    return "still waiting 5 s later: " + outcome.get();
  }
  return outcome.get();
}

template <class Done>
bool until(Done done) {
  const auto give = Steady::now() + 10s;
  while (!done()) {
    if (Steady::now() > give) return false;
    std::this_thread::sleep_for(1ms);  // one inspect round trip per millisecond at most
  }
  return true;
}

double msSince(Steady::time_point from) { return std::chrono::duration<double, std::milli>(Steady::now() - from).count(); }

}  // namespace

TEST_SUITE("CancellationOnRedis") {
  TEST_CASE("a cancelled read wait and write wait on Redis end at once and leave no queue entry") {
    RedisProcess server;
    auto holder = rwOn(server);
    auto rw = rwOn(server);
    for (const bool read : {true, false}) {
      CAPTURE(read);
      const std::shared_ptr<dlock::ILock>& held = read ? holder->writeLock() : holder->readLock();
      const std::shared_ptr<dlock::ILock>& side = read ? rw->readLock() : rw->writeLock();
      REQUIRE(held->tryLock("k"));
      dlock::CancelSource stop;
      Outcome outcome = waitOn([&] {
        side->lock("k", stop.token());
        return true;
      });
      REQUIRE(until([&] { return rw->inspect("k").waiters.size() == 1; }));
      const Steady::time_point cancelled = Steady::now();
      stop.requestCancel();
      CHECK(within5s(outcome, [&] { side->close(); }) == "interrupted");
      MESSAGE(std::string(read ? "read" : "write") << " wait on Redis: cancel to InterruptedError " << msSince(cancelled)
                                                   << " ms");
      CHECK(rw->inspect("k").waiters.empty());
      held->unlock("k");
      const dlock::ReadWriteInfo after = rw->inspect("k");
      CHECK_FALSE(after.writer.has_value());  // handed to nobody
      CHECK(after.readers.empty());
    }
  }

  TEST_CASE("a cancelled permit wait on Redis ends at once, leaves no queue entry and takes no permit") {
    RedisProcess server;
    auto holder = semaphoreOn(server, 60s);
    auto semaphore = semaphoreOn(server, 60s);
    dlock::PermitLease one = holder->acquire(1);
    REQUIRE(one);
    dlock::CancelSource stop;
    dlock::AcquireOptions options;
    options.cancel = stop.token();
    Outcome outcome = waitOn([&] { return static_cast<bool>(semaphore->acquire(2, options)); });
    REQUIRE(until([&] { return semaphore->inspect().waiters.size() == 1; }));
    const Steady::time_point cancelled = Steady::now();
    stop.requestCancel();
    CHECK(within5s(outcome, [&] { semaphore->close(); }) == "interrupted");
    MESSAGE("permit wait on Redis: cancel to InterruptedError " << msSince(cancelled) << " ms");
    CHECK(semaphore->inspect().waiters.empty());
    one.release();
    CHECK(semaphore->availablePermits() == 2);
  }

  TEST_CASE("close() of a ReadWriteLock on Redis wakes a blocked reader and writer, a destroyed one frees its keys") {
    RedisProcess server;
    auto other = rwOn(server);
    auto rw = rwOn(server);
    REQUIRE(other->writeLock()->tryLock("w"));
    REQUIRE(other->readLock()->tryLock("r"));
    Outcome reader = waitOn([&] {
      rw->readLock()->lock("w");
      return true;
    });
    Outcome writer = waitOn([&] { return rw->writeLock()->tryLock("r", 120s); });
    REQUIRE(until([&] { return rw->inspect("w").waiters.size() == 1 && rw->inspect("r").waiters.size() == 1; }));
    const Steady::time_point closing = Steady::now();
    rw->writeLock()->close();
    CHECK(within5s(reader, [&] { other->writeLock()->unlock("w"); }) == "interrupted");
    CHECK(within5s(writer, [&] { other->readLock()->unlock("r"); }) == "interrupted");
    MESSAGE("close() returned a blocked reader and writer in " << msSince(closing) << " ms");
    CHECK(rw->inspect("w").waiters.empty());
    CHECK(rw->inspect("r").waiters.empty());

    auto holding = rwOn(server);
    REQUIRE(holding->readLock()->tryLock("a"));
    REQUIRE(holding->writeLock()->tryLock("b"));
    holding.reset();
    auto taker = rwOn(server);
    CHECK(taker->writeLock()->tryLock("a"));  // one try: no lease to wait out
    CHECK(taker->writeLock()->tryLock("b"));
  }

  TEST_CASE("PermitLease::extend on Redis moves the permits' lease on the server") {
    RedisProcess server;
    auto semaphore = semaphoreOn(server, 5s);
    dlock::PermitLease permits = semaphore->acquire(1);
    REQUIRE(permits);
    REQUIRE(semaphore->inspect().holders.size() == 1);
    CHECK(semaphore->inspect().holders.front().remaining <= 5s);
    permits.extend(120s);
    const dlock::SemaphoreInfo info = semaphore->inspect();
    REQUIRE(info.holders.size() == 1);
    CHECK(info.holders.front().remaining > 60s);  // the server's lease end moved
    CHECK(permits.remainingLease() > 60s);
    permits.release();
  }
}
