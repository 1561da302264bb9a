// SPDX-License-Identifier: Apache-2.0
// Cancellation and close() of the read-write lock's and the semaphore's waits on the memory
// backend: a cancelled read, write or permit wait throws InterruptedError leaving no queue entry;
// close() of a ReadWriteLock wakes its readers and writers and releases its thread holds, as its
// destruction does; extend and remainingLease of read-write holds and of permits.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "Fixtures.h"
#include "LogCapture.h"
#include "Waiter.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::Waiter;
using Steady = std::chrono::steady_clock;

namespace {

struct WaitsFixture : dlock::test::VirtualFixture {
  // A waiter's place lasts a minute of the virtual clock, which never moves unless a test moves
  // it: a waiter a cancel or close() does not wake sleeps until the test gives up on it.
  std::shared_ptr<dlock::ReadWriteLock> rw(std::chrono::milliseconds lease = 60s) const {
    return dlock::LockBuilder().backend(backend).clock(clock).leaseTime(lease).waiterLease(60s).buildReadWrite();
  }
  std::shared_ptr<dlock::Semaphore> semaphore(std::uint32_t capacity,
                                              std::optional<std::chrono::milliseconds> lease = 60s,
                                              const std::string& name = "s") const {
    dlock::SemaphoreBuilder builder;
    builder.backend(backend).clock(clock).name(name).permits(capacity).waiterLease(60s);
    if (lease) builder.leaseTime(*lease);
    return builder.build();
  }
};

// Until `done` holds (real time, bounded).
template <class Done>
bool until(Done done) {
  const auto give = Steady::now() + 10s;
  while (!done()) {
    if (Steady::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_SUITE("Cancellation") {
  TEST_CASE("a cancel ends a read wait and a write wait at once, leaving no queue entry") {
    for (const auto mode : {dlock::ReadWriteMode::Read, dlock::ReadWriteMode::Write}) {
      const bool read = mode == dlock::ReadWriteMode::Read;
      CAPTURE(read);
      WaitsFixture f;
      auto holder = f.rw();
      auto rw = f.rw();
      // A writer holds against a reader; a reader against a writer.
      const std::shared_ptr<dlock::ILock>& held = read ? holder->writeLock() : holder->readLock();
      REQUIRE(held->tryLock("k"));
      const std::shared_ptr<dlock::ILock>& side = read ? rw->readLock() : rw->writeLock();
      dlock::CancelSource stop;
      Waiter waiter([&] {
        side->lock("k", stop.token());
        return true;
      });
      waiter.unblock = [&] { side->close(); };
      REQUIRE(until([&] { return rw->inspect("k").waiters.size() == 1; }));
      const Steady::time_point cancelled = Steady::now();
      stop.requestCancel();
      REQUIRE(waiter.returned.wait(5s));
      MESSAGE(std::string(read ? "read" : "write") << " wait: cancel to InterruptedError " << waiter.msSince(cancelled) << " ms");
      CHECK(waiter.interrupted);
      CHECK(rw->inspect("k").waiters.empty());
      CHECK_FALSE(side->isHeld("k"));
      held->unlock("k");
      const dlock::ReadWriteInfo after = rw->inspect("k");
      CHECK_FALSE(after.writer.has_value());  // handed to nobody
      CHECK(after.readers.empty());
    }
  }

  TEST_CASE("a read or write token cancelled already throws before anything is queued") {
    WaitsFixture f;
    auto rw = f.rw();
    dlock::CancelSource stop;
    stop.requestCancel();
    CHECK_THROWS_AS(rw->readLock()->lock("k", stop.token()), dlock::InterruptedError);
    CHECK_THROWS_AS((void)rw->writeLock()->tryLock("k", 1s, stop.token()), dlock::InterruptedError);
    const dlock::ReadWriteInfo info = rw->inspect("k");
    CHECK(info.readers.empty());
    CHECK_FALSE(info.writer.has_value());
  }

  TEST_CASE("a cancel ends a permit wait at once, leaving no queue entry and no permit taken") {
    WaitsFixture f;
    auto holder = f.semaphore(2);
    auto semaphore = f.semaphore(2);
    dlock::PermitLease one = holder->acquire(1);
    REQUIRE(one);
    dlock::CancelSource stop;
    dlock::AcquireOptions options;
    options.cancel = stop.token();
    Waiter waiter([&] { return static_cast<bool>(semaphore->acquire(2, options)); });
    waiter.unblock = [&] { semaphore->close(); };
    REQUIRE(until([&] { return semaphore->inspect().waiters.size() == 1; }));
    const Steady::time_point cancelled = Steady::now();
    stop.requestCancel();
    REQUIRE(waiter.returned.wait(5s));
    MESSAGE("permit wait: cancel to InterruptedError " << waiter.msSince(cancelled) << " ms");
    CHECK(waiter.interrupted);
    CHECK(semaphore->inspect().waiters.empty());
    one.release();
    CHECK(semaphore->availablePermits() == 2);  // granted to nobody
    // The tryAcquire with a timeout takes a token too; a cancelled one sends nothing.
    CHECK_THROWS_AS((void)semaphore->tryAcquire(1, 10s, stop.token()), dlock::InterruptedError);
    CHECK(semaphore->inspect().holders.empty());
  }

  TEST_CASE("Semaphore::close() ends its permit waits and refuses new ones, permits held stay their holders'") {
    WaitsFixture f;
    auto semaphore = f.semaphore(1);
    dlock::PermitLease held = semaphore->acquire(1);
    REQUIRE(held);
    Waiter waiter([&] { return static_cast<bool>(semaphore->acquire(1)); });
    waiter.unblock = [&] { semaphore->close(); };
    REQUIRE(until([&] { return semaphore->inspect().waiters.size() == 1; }));
    semaphore->close();
    REQUIRE(waiter.returned.wait(5s));
    CHECK(waiter.interrupted);
    CHECK(semaphore->inspect().waiters.empty());
    CHECK_THROWS_AS((void)semaphore->tryAcquire(1), dlock::InterruptedError);
    CHECK(held.isHeld());
    held.release();
    CHECK(semaphore->availablePermits() == 1);
  }

  TEST_CASE("close() of a ReadWriteLock wakes a blocked reader and writer, refuses new waits, releases its holds") {
    WaitsFixture f;
    dlock::test::LogCapture log;
    auto other = f.rw();
    auto rw = f.rw();
    REQUIRE(other->writeLock()->tryLock("w"));  // keeps out a reader
    REQUIRE(other->readLock()->tryLock("r"));   // keeps out a writer
    REQUIRE(rw->readLock()->tryLock("mine"));
    REQUIRE(rw->writeLock()->tryLock("ours"));
    Waiter reader([&] {
      rw->readLock()->lock("w");
      return true;
    });
    Waiter writer([&] { return rw->writeLock()->tryLock("r", 60s); });
    reader.unblock = [&] { other->writeLock()->unlock("w"); };
    writer.unblock = [&] { other->readLock()->unlock("r"); };
    REQUIRE(until([&] { return rw->inspect("w").waiters.size() == 1 && rw->inspect("r").waiters.size() == 1; }));
    rw->readLock()->close();  // either side closes the lock
    REQUIRE(reader.returned.wait(5s));
    REQUIRE(writer.returned.wait(5s));
    CHECK(reader.interrupted);
    CHECK(writer.interrupted);
    CHECK(rw->inspect("w").waiters.empty());
    CHECK(rw->inspect("r").waiters.empty());
    CHECK(rw->inspect("mine").readers.empty());
    CHECK_FALSE(rw->inspect("ours").writer.has_value());
    CHECK(rw->inspect("w").writer.has_value());  // the other lock's
    CHECK_THROWS_AS(rw->writeLock()->lock("free"), dlock::InterruptedError);
    CHECK_THROWS_AS((void)rw->readLock()->tryLock("mine"), dlock::InterruptedError);  // its hold was released
    CHECK_THROWS_AS(rw->readLock()->unlock("mine"), dlock::LockLostError);
    CHECK_THROWS_AS(rw->writeLock()->unlock("ours"), dlock::LockLostError);
    CHECK(log.text().find("released 'mine'") != std::string::npos);
    CHECK(log.text().find("released 'ours'") != std::string::npos);
    rw->writeLock()->close();  // idempotent
  }

  TEST_CASE("a ReadWriteLock destroyed while holding a read and a write key frees them at once") {
    WaitsFixture f;
    dlock::test::LogCapture log;
    auto other = f.rw();
    auto rw = f.rw();
    REQUIRE(rw->readLock()->tryLock("a"));
    REQUIRE(rw->writeLock()->tryLock("b"));
    dlock::Lease lease = rw->writeLock()->acquire("lease");
    REQUIRE(lease);
    rw.reset();
    CHECK(other->writeLock()->tryLock("a"));  // one try: no lease to wait out
    CHECK(other->writeLock()->tryLock("b"));
    CHECK(lease.isHeld());  // a Lease is its holder's
    CHECK(other->inspect("lease").writer.has_value());
    lease.release();
    CHECK(log.text().find("released 'a'") != std::string::npos);
    CHECK(log.text().find("ended holding") == std::string::npos);
  }

  TEST_CASE("a downgraded read hold and an upgraded write are released at close") {
    WaitsFixture f;
    auto rw = f.rw();
    REQUIRE(rw->writeLock()->tryLock("down"));
    REQUIRE(rw->readLock()->tryLock("down"));
    rw->writeLock()->unlock("down");  // downgrade: the read hold is the thread's now
    REQUIRE(rw->readLock()->tryLock("up"));
    REQUIRE(rw->tryUpgrade("up"));
    rw->writeLock()->close();
    CHECK(rw->inspect("down").readers.empty());
    CHECK_FALSE(rw->inspect("up").writer.has_value());
  }

  TEST_CASE("extend and remainingLease of read and write holds, and of a read-write Lease") {
    WaitsFixture f;
    auto rw = f.rw(10s);
    REQUIRE(rw->readLock()->tryLock("r"));
    REQUIRE(rw->writeLock()->tryLock("w"));
    f.clock->advance(4s);
    CHECK(rw->readLock()->remainingLease("r") == 6s);
    rw->readLock()->extend("r", 20s);
    rw->writeLock()->extend("w", 30s);
    CHECK(rw->readLock()->remainingLease("r") == 20s);
    CHECK(rw->writeLock()->remainingLease("w") == 30s);
    REQUIRE(rw->inspect("r").readers.size() == 1);
    CHECK(rw->inspect("r").readers.front().remaining == 20s);  // the backend's view moved too
    CHECK(rw->inspect("w").writer->remaining == 30s);
    REQUIRE(rw->readLock()->tryLock("w"));  // carried by the write
    CHECK_THROWS_AS(rw->readLock()->extend("w", 5s), dlock::InvalidArgumentError);
    rw->readLock()->unlock("w");
    f.clock->advance(15s);  // past the first leases' end
    CHECK(rw->readLock()->isHeld("r"));
    rw->readLock()->unlock("r");
    rw->writeLock()->unlock("w");

    dlock::Lease lease = rw->readLock()->acquire("l");
    REQUIRE(lease);
    lease.extend(25s);
    CHECK(lease.remainingLease() == 25s);
    CHECK(rw->inspect("l").readers.front().remaining == 25s);
    lease.release();
  }

  TEST_CASE("PermitLease::extend moves the permits' lease, remainingLease reads it locally") {
    WaitsFixture f;
    auto semaphore = f.semaphore(2, 10s);
    dlock::PermitLease permits = semaphore->acquire(2);
    REQUIRE(permits);
    f.clock->advance(9s);
    CHECK(permits.remainingLease() == 1s);
    permits.extend(20s);
    CHECK(permits.remainingLease() == 20s);
    REQUIRE(semaphore->inspect().holders.size() == 1);
    CHECK(semaphore->inspect().holders.front().remaining == 20s);
    f.clock->advance(15s);  // past the first lease's end
    CHECK(permits.isHeld());
    CHECK(semaphore->inspect().inUse == 2);
    CHECK_THROWS_AS(permits.extend(0ms), dlock::InvalidArgumentError);
    permits.release();
    CHECK(permits.remainingLease() == 0ms);
    CHECK_THROWS_AS(permits.extend(1s), dlock::NotOwnerError);

    auto watched = f.semaphore(1, std::nullopt, "watched");
    dlock::PermitLease renewed = watched->acquire(1);
    REQUIRE(renewed);
    CHECK_THROWS_AS(renewed.extend(5s), dlock::InvalidArgumentError);  // the watchdog renews it
  }
}
