// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "dlock/LockError.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/macros.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

namespace {

struct ReadWriteFixture : VirtualFixture {
  std::shared_ptr<dlock::ReadWriteLock> leasedRw(std::chrono::milliseconds lease = 10s) const {
    return dlock::LockBuilder().backend(backend).clock(clock).leaseTime(lease).buildReadWrite();
  }
  std::shared_ptr<dlock::ReadWriteLock> watchedRw(std::chrono::milliseconds lease = 3s) const {
    return dlock::LockBuilder().backend(backend).clock(clock).watchdogLease(lease).buildReadWrite();
  }
};

// Blocks (real time, bounded) until `count` waiters are queued for `key`.
bool waitForWaiters(dlock::ReadWriteLock& rw, std::string_view key, std::size_t count) {
  const auto give = std::chrono::steady_clock::now() + 10s;
  while (rw.inspect(key).waiters.size() != count) {
    if (std::chrono::steady_clock::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

// A thread that takes the write lock of `key` (waiting up to 30 s), holds it until told, then
// releases it. `got` is set once it holds.
struct Writer {
  Writer(std::shared_ptr<dlock::ReadWriteLock> rw, std::string key)
      : thread([this, rw = std::move(rw), key = std::move(key)] {
          acquired = rw->writeLock()->tryLock(key, 30s);
          if (acquired) fence = rw->writeLock()->fencingToken(key);
          got.set();
          if (!acquired) return;
          (void)release.wait(30s);
          rw->writeLock()->unlock(key);
        }) {}
  ~Writer() {
    release.set();
    thread.join();
  }
  dlock::test::Event got;
  dlock::test::Event release;
  bool acquired = false;
  std::uint64_t fence = 0;
  std::thread thread;
};

}  // namespace

TEST_SUITE("ReadWriteLock") {
  TEST_CASE("readers share a key, a writer waits for them, and readers for a writer") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    dlock::Lease r1 = rw->readLock()->acquire("k", {});
    dlock::Lease r2 = rw->readLock()->acquire("k", {});
    REQUIRE(r1);
    REQUIRE(r2);
    CHECK(rw->inspect("k").readers.size() == 2);
    CHECK_FALSE(rw->writeLock()->tryLock("k"));
    r1.release();
    r2.release();
    REQUIRE(rw->writeLock()->tryLock("k"));
    CHECK_FALSE(rw->readLock()->acquire("k", {0ms, std::nullopt}));
    rw->writeLock()->unlock("k");
    CHECK(rw->inspect("k").readers.empty());
  }

  TEST_CASE("once a writer waits, a new reader queues behind it (no writer starvation)") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    dlock::Lease reader = rw->readLock()->acquire("k", {});
    REQUIRE(reader);
    Writer writer(rw, "k");
    REQUIRE(waitForWaiters(*rw, "k", 1));
    CHECK_FALSE(rw->readLock()->tryLock("k"));  // readers hold, but a writer waits
    reader.release();                          // the release hands the key to the writer
    REQUIRE(writer.got.wait());
    CHECK(writer.acquired);
  }

  TEST_CASE("reads and writes are reentrant per thread, a writer reads without a round trip") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    auto r = rw->readLock();
    auto w = rw->writeLock();
    REQUIRE(w->tryLock("k"));
    REQUIRE(w->tryLock("k"));
    CHECK(w->holdCount("k") == 2);
    const std::uint64_t calls = f.backend->calls();
    REQUIRE(r->tryLock("k"));
    CHECK(f.backend->calls() == calls);
    CHECK(r->isHeld("k"));
    CHECK(r->fencingToken("k") == w->fencingToken("k"));
    r->unlock("k");
    w->unlock("k");
    w->unlock("k");
    CHECK_FALSE(w->isHeld("k"));
    REQUIRE(r->tryLock("k"));
    REQUIRE(r->tryLock("k"));
    CHECK(r->holdCount("k") == 2);
    r->unlock("k");
    r->unlock("k");
    CHECK(rw->inspect("k").readers.empty());
  }

  TEST_CASE("write, read, release the write: no queued writer gets in between (curator#1138)") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    auto r = rw->readLock();
    auto w = rw->writeLock();
    REQUIRE(w->tryLock("k"));
    const std::uint64_t fence = w->fencingToken("k");
    Writer other(rw, "k");
    REQUIRE(waitForWaiters(*rw, "k", 1));
    REQUIRE(r->tryLock("k"));
    w->unlock("k");  // the downgrade: the read hold stays, in one step
    const dlock::ReadWriteInfo info = rw->inspect("k");
    CHECK_FALSE(info.writer);
    CHECK(info.readers.size() == 1);
    CHECK(info.waiters.size() == 1);
    CHECK_FALSE(other.got.wait(50ms));
    CHECK(r->isHeld("k"));
    CHECK(r->fencingToken("k") == fence);
    CHECK_FALSE(rw->readLock()->acquire("k", {0ms, std::nullopt}));  // the writer still waits first
    r->unlock("k");
    REQUIRE(other.got.wait());
    CHECK(other.acquired);
    CHECK(other.fence > fence);
  }

  TEST_CASE("a reader asking for the write lock gets UpgradeError at once, sending nothing") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    REQUIRE(rw->readLock()->tryLock("k"));
    const std::uint64_t calls = f.backend->calls();
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_AS(rw->writeLock()->lock("k"), dlock::UpgradeError);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took < 1ms);
    CHECK(f.backend->calls() == calls);
    CHECK_THROWS_AS((void)rw->writeLock()->tryLock("k", 10s), dlock::UpgradeError);
    rw->readLock()->unlock("k");
  }

  TEST_CASE("tryUpgrade: the sole reader becomes the writer, and releasing the write reads again") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    auto r = rw->readLock();
    auto w = rw->writeLock();
    CHECK_THROWS_AS((void)rw->tryUpgrade("k"), dlock::NotOwnerError);
    REQUIRE(r->tryLock("k"));
    const std::uint64_t before = r->fencingToken("k");
    dlock::Lease another = r->acquire("k", {});
    REQUIRE(another);
    CHECK_FALSE(rw->tryUpgrade("k"));  // another reader
    another.release();
    REQUIRE(rw->tryUpgrade("k"));
    CHECK(w->isHeld("k"));
    CHECK(w->fencingToken("k") > before);
    CHECK(rw->inspect("k").writer);
    CHECK_FALSE(r->acquire("k", {0ms, std::nullopt}));
    w->unlock("k");  // back to the read hold
    CHECK(r->isHeld("k"));
    const dlock::ReadWriteInfo info = rw->inspect("k");
    CHECK_FALSE(info.writer);
    CHECK(info.readers.size() == 1);
    r->unlock("k");
    CHECK(rw->inspect("k").readers.empty());
  }

  TEST_CASE("a tryUpgrade cut off by a connection error leaves the read hold as it was") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    REQUIRE(rw->readLock()->tryLock("k"));
    f.backend->failNextCalls(1);
    CHECK_THROWS_AS((void)rw->tryUpgrade("k"), dlock::ConnectionError);
    CHECK(rw->readLock()->isHeld("k"));
    CHECK_FALSE(rw->writeLock()->isHeld("k"));
    CHECK(rw->inspect("k").readers.size() == 1);
    REQUIRE(rw->tryUpgrade("k"));
    rw->writeLock()->unlock("k");
    rw->readLock()->unlock("k");
  }

  TEST_CASE("read holds are renewed by the watchdog, each reader's own, a downgraded one too") {
    ReadWriteFixture f;
    auto rw = f.watchedRw(3s);
    dlock::Lease a = rw->readLock()->acquire("k", {});
    REQUIRE(rw->writeLock()->tryLock("w"));
    REQUIRE(rw->readLock()->tryLock("w"));
    rw->writeLock()->unlock("w");  // downgraded: a read hold of its own, renewed as any other
    dlock::Lease x = rw->writeLock()->acquire("x", {});
    REQUIRE(x);
    for (int i = 0; i < 10; ++i) f.clock->advance(1s);
    CHECK(a.isHeld());
    CHECK(x.isHeld());
    CHECK(rw->readLock()->isHeld("w"));
    // Reads and the write in one batch: one round trip renews all three.
    const dlock::LockStats stats = rw->writeLock()->stats();
    CHECK(stats.renewalRoundTrips > 0);
    CHECK(stats.renewals == 3 * stats.renewalRoundTrips);
    x.release();
    const dlock::ReadWriteInfo info = rw->inspect("k");
    REQUIRE(info.readers.size() == 1);
    CHECK(info.readers[0].remaining > 1s);
    CHECK(rw->inspect("w").readers.size() == 1);
    a.release();
    rw->readLock()->unlock("w");
  }

  TEST_CASE("a lost read hold is reported as the exclusive lock's are, its unlock throws LockLostError") {
    ReadWriteFixture f;
    auto rw = f.watchedRw(3s);
    dlock::test::Event lost;
    std::string lostKey;
    rw->readLock()->onLockLost([&](std::string_view key, std::uint64_t) {
      lostKey = std::string(key);
      lost.set();
    });
    REQUIRE(rw->readLock()->tryLock("k"));
    f.backend->forgetLeases();
    f.clock->advance(2s);  // the next renewal finds it gone
    REQUIRE(lost.wait());
    CHECK(lostKey == "k");
    CHECK_FALSE(rw->readLock()->isHeld("k"));
    CHECK_THROWS_AS(rw->readLock()->unlock("k"), dlock::LockLostError);
    CHECK_THROWS_AS(rw->readLock()->unlock("k"), dlock::NotOwnerError);
  }

  TEST_CASE("a fixed lease is not renewed: unlock after it ended is LockLostError") {
    ReadWriteFixture f;
    auto rw = f.leasedRw(1s);
    REQUIRE(rw->writeLock()->tryLock("k"));
    REQUIRE(rw->readLock()->tryLock("r"));
    f.clock->advance(2s);
    CHECK_THROWS_AS(rw->writeLock()->unlock("k"), dlock::LockLostError);
    CHECK_THROWS_AS(rw->readLock()->unlock("r"), dlock::LockLostError);
  }

  TEST_CASE("an unlock after the lease ended never frees the hold someone else took since") {
    ReadWriteFixture f;
    auto rw = f.leasedRw(1s);
    REQUIRE(rw->writeLock()->tryLock("k"));
    f.clock->advance(2s);
    dlock::Lease next = rw->writeLock()->acquire("k", {0ms, std::nullopt});
    REQUIRE(next);
    CHECK_THROWS_AS(rw->writeLock()->unlock("k"), dlock::LockLostError);
    const dlock::ReadWriteInfo info = rw->inspect("k");
    REQUIRE(info.writer);
    CHECK(info.writer->token == next.token());
    CHECK(next.isHeld());
  }

  TEST_CASE("writers get rising fencing tokens, a reader gets the last write's") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    REQUIRE(rw->readLock()->tryLock("k"));
    CHECK(rw->readLock()->fencingToken("k") == 0);
    rw->readLock()->unlock("k");
    REQUIRE(rw->writeLock()->tryLock("k"));
    const std::uint64_t first = rw->writeLock()->fencingToken("k");
    rw->writeLock()->unlock("k");
    REQUIRE(rw->writeLock()->tryLock("k"));
    const std::uint64_t second = rw->writeLock()->fencingToken("k");
    rw->writeLock()->unlock("k");
    CHECK(second > first);
    REQUIRE(rw->readLock()->tryLock("k"));
    CHECK(rw->readLock()->fencingToken("k") == second);
    rw->readLock()->unlock("k");
  }

  TEST_CASE("bad input is InvalidArgumentError with nothing sent, unlock twice is NotOwnerError") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    const std::uint64_t calls = f.backend->calls();
    CHECK_THROWS_AS(rw->readLock()->lock(""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)rw->writeLock()->tryLock(std::string(2048, 'k')), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)rw->readLock()->tryLock("k", 1s, 0ms), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)rw->tryUpgrade(""), dlock::InvalidArgumentError);
    CHECK(f.backend->calls() == calls);
    REQUIRE(rw->writeLock()->tryLock("k"));
    rw->writeLock()->unlock("k");
    CHECK_THROWS_AS(rw->writeLock()->unlock("k"), dlock::NotOwnerError);
    CHECK_THROWS_AS(rw->readLock()->unlock("k"), dlock::NotOwnerError);
  }

  TEST_CASE("a writer that times out leaves the queue, and readers go on") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    dlock::Lease reader = rw->readLock()->acquire("k", {});
    REQUIRE(reader);
    dlock::test::onVirtualTime(*f.clock, [&] { CHECK_FALSE(rw->writeLock()->tryLock("k", 30ms)); }, 5ms);
    CHECK(rw->inspect("k").waiters.empty());
    CHECK(rw->readLock()->tryLock("k"));
    rw->readLock()->unlock("k");
  }

  TEST_CASE("buildReadWrite checks options as build() does, and refuses Redlock saying why") {
    ReadWriteFixture f;
    CHECK_THROWS_AS((void)dlock::LockBuilder().buildReadWrite(), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(f.backend).leaseTime(0ms).buildReadWrite(), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(f.backend).waiterLease(1ms).buildReadWrite(), dlock::ConfigError);
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (int i = 0; i < 3; ++i) members.push_back(std::make_shared<dlock::MemoryOperator>(f.clock));
    auto redlock = std::make_shared<dlock::RedlockOperator>(members);
    try {
      (void)dlock::LockBuilder().backend(redlock).buildReadWrite();
      FAIL("Redlock built a read-write lock");
    } catch (const dlock::ConfigError& error) {
      CHECK(std::string(error.what()).find("Redlock") != std::string::npos);
    }
  }

  TEST_CASE("DISTRIBUTED_READ_LOCK_WITH and DISTRIBUTED_WRITE_LOCK_WITH hold for the scope") {
    ReadWriteFixture f;
    auto rw = f.leasedRw();
    {
      DISTRIBUTED_READ_LOCK_WITH(rw, "config");
      DISTRIBUTED_READ_LOCK_WITH(*rw, "config");
      CHECK(rw->readLock()->holdCount("config") == 2);
      REQUIRE(rw->tryUpgrade("config"));  // two holds of one thread are one reader
      CHECK(rw->writeLock()->isHeld("config"));
      rw->writeLock()->unlock("config");  // back to reading; the guards release the reads
    }
    CHECK_FALSE(rw->readLock()->isHeld("config"));
    {
      DISTRIBUTED_WRITE_LOCK_WITH(rw, "config");
      CHECK(rw->writeLock()->isHeld("config"));
      DISTRIBUTED_TRY_READ_LOCK_WITH(rw, "config", 0ms) { CHECK(rw->readLock()->isHeld("config")); }
      else {
        FAIL("the writer could not read");
      }
    }
    CHECK(rw->inspect("config").readers.empty());
    CHECK_FALSE(rw->inspect("config").writer);
  }
}
