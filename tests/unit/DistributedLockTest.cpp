// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/WaitStrategies.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

TEST_SUITE("DistributedLock") {
  TEST_CASE("8 threads x 10000 locked increments of a plain counter end exact") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = dlock::LockBuilder().backend(backend).leaseTime(10s).build();
    long counter = 0;  // deliberately not atomic: only the lock protects it
    std::vector<std::thread> workers;
    for (int t = 0; t < 8; ++t) {
      workers.emplace_back([&] {
        for (int i = 0; i < 10000; ++i) {
          lock->lock("counter");
          const long seen = counter;
          counter = seen + 1;
          lock->unlock("counter");
        }
      });
    }
    for (auto& worker : workers) worker.join();
    CHECK(counter == 80000);
    CHECK(lock->stats().acquisitions == 80000);
    CHECK(backend->size() == 0);
  }

  TEST_CASE("a holder that never unlocks loses its lease exactly at its TTL") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    f.clock->advance(30s - 1ms);
    CHECK(lock->isHeld("k"));
    CHECK(f.backend->inspect("k").held);
    CHECK(f.backend->inspect("k").remaining == 1ms);
    f.clock->advance(1ms);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK_FALSE(f.backend->inspect("k").held);
    // Another thread (another owner) can take it now.
    bool taken = false;
    std::thread other([&] {
      taken = lock->tryLock("k");
      if (taken) lock->unlock("k");
    });
    other.join();
    CHECK(taken);
  }

  TEST_CASE("unlock from a thread that does not hold the key throws NotOwnerError") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    std::string error;
    std::thread other([&] {
      try {
        lock->unlock("k");
      } catch (const dlock::NotOwnerError& e) {
        error = e.what();
      }
    });
    other.join();
    CHECK(error.find("not held by this thread") != std::string::npos);
    CHECK(error.find("'k'") != std::string::npos);
    CHECK(error.find("memory://") != std::string::npos);
    CHECK(lock->isHeld("k"));  // the real holder is unaffected
    lock->unlock("k");
  }

  TEST_CASE("unlock of a key never locked throws NotOwnerError and sends nothing") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    const auto calls = f.backend->calls();
    CHECK_THROWS_AS(lock->unlock("never"), dlock::NotOwnerError);
    CHECK(f.backend->calls() == calls);
  }

  TEST_CASE("unlock after the lease expired throws LockLostError and forgets the hold") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    f.clock->advance(31s);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    CHECK(lock->holdCount("k") == 0);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::NotOwnerError);
    CHECK(lock->stats().lostLeases == 1);
  }

  TEST_CASE("unlock after another owner took the expired key throws LockLostError and leaves theirs") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    f.clock->advance(30s);
    std::string otherToken;
    std::thread other([&] {
      CHECK(lock->tryLock("k"));
      otherToken = f.backend->holderOf("k");
    });
    other.join();
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    CHECK(f.backend->holderOf("k") == otherToken);  // compare-and-delete spared the new owner
  }

  TEST_CASE("tryLock with a timeout on a held key returns false after the timeout, never sooner") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = dlock::LockBuilder().backend(backend).leaseTime(10s).build();
    REQUIRE(lock->tryLock("k"));
    for (auto wait : {std::shared_ptr<dlock::IWait>(std::make_shared<dlock::NotifyWait>()),
                      std::shared_ptr<dlock::IWait>(std::make_shared<dlock::FixedIntervalWait>()),
                      std::shared_ptr<dlock::IWait>(std::make_shared<dlock::ExponentialBackoffWait>())}) {
      auto contender = dlock::LockBuilder().backend(backend).leaseTime(10s).waitStrategy(wait).build();
      const auto start = std::chrono::steady_clock::now();
      CHECK_FALSE(contender->tryLock("k", 50ms));
      const auto waited = std::chrono::steady_clock::now() - start;
      CHECK(waited >= 50ms);
      CHECK(waited < 5s);  // generous: only guards against waiting for the 10 s lease
      CHECK(contender->stats().failedTries == 1);
    }
    lock->unlock("k");
  }

  TEST_CASE("tryLock without a timeout tries exactly once") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto other = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    const auto calls = f.backend->calls();
    CHECK_FALSE(other->tryLock("k"));
    CHECK(f.backend->calls() == calls + 1);
  }

  TEST_CASE("bad input gets InvalidArgumentError and the backend sees no call") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    const std::string oversized(dlock::kMaxKeyBytes + 1, 'x');
    const auto calls = f.backend->calls();

    CHECK_THROWS_AS(lock->lock(""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->tryLock(""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->tryLock("", 1s), dlock::InvalidArgumentError);
    CHECK_THROWS_AS(lock->unlock(""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->acquire(""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS(lock->lock(oversized), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->tryLock(oversized, 1s), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->tryLock("k", 1s, 0ms), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->tryLock("k", 1s, -1ms), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->tryLock("k", 0ms, 0ms), dlock::InvalidArgumentError);
    dlock::AcquireOptions zeroLease;
    zeroLease.leaseTime = 0ms;
    CHECK_THROWS_AS((void)lock->acquire("k", zeroLease), dlock::InvalidArgumentError);

    CHECK(f.backend->calls() == calls);

    // The messages say what was wrong.
    try {
      lock->lock(oversized);
    } catch (const dlock::InvalidArgumentError& e) {
      CHECK(std::string(e.what()).find("1025 bytes") != std::string::npos);
    }
    try {
      (void)lock->tryLock("k", 1s, -5ms);
    } catch (const dlock::InvalidArgumentError& e) {
      CHECK(std::string(e.what()).find("lease time must be positive") != std::string::npos);
    }
  }

  TEST_CASE("tryLock with a timeout of zero or less tries once instead of throwing") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto other = f.leased(30s);
    for (const auto timeout : {0ms, -5ms, std::chrono::milliseconds::min()}) {
      CAPTURE(timeout.count());
      auto calls = f.backend->calls();
      REQUIRE(lock->tryLock("k", timeout));  // free: taken at the one try
      CHECK(f.backend->calls() == calls + 1);
      calls = f.backend->calls();
      CHECK_FALSE(other->tryLock("k", timeout));  // held: false after one try
      CHECK_FALSE(other->tryLock("k", timeout, 10s));
      CHECK(f.backend->calls() == calls + 2);
      lock->unlock("k");
    }
    auto defaults = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(30s).defaultKey("d").build();
    CHECK(defaults->tryLock(0ms));
    defaults->unlock();
  }

  TEST_CASE("a wait budget computed as deadline - now that has run out tries once") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    const auto deadline = std::chrono::steady_clock::now();  // the work before took all the budget
    const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const auto calls = f.backend->calls();
    CHECK(lock->tryLock("k", remaining));
    CHECK(f.backend->calls() == calls + 1);
    lock->unlock("k");
    dlock::AcquireOptions options;
    options.waitTime = remaining;
    dlock::Lease lease = lock->acquire("k", options);
    CHECK(lease);
    options.waitTime = -1ms;
    CHECK_FALSE(lock->acquire("k", options));  // held by `lease`: one try, an empty lease
  }

  TEST_CASE("a lease longer than kMaxLeaseTime is refused before anything is sent") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    const auto calls = f.backend->calls();
    for (const auto lease : {dlock::kMaxLeaseTime + 1ms, std::chrono::milliseconds::max()}) {
      CAPTURE(lease.count());
      CHECK_THROWS_AS((void)lock->tryLock("k", 1s, lease), dlock::InvalidArgumentError);
      CHECK_THROWS_AS((void)lock->tryLock("k", 0ms, lease), dlock::InvalidArgumentError);
      dlock::AcquireOptions acquireOptions;
      acquireOptions.leaseTime = lease;
      CHECK_THROWS_AS((void)lock->acquire("k", acquireOptions), dlock::InvalidArgumentError);
      CHECK_THROWS_AS((void)dlock::LockBuilder().backend(f.backend).leaseTime(lease).build(), dlock::ConfigError);
      CHECK_THROWS_AS((void)dlock::LockBuilder().backend(f.backend).watchdogLease(lease).build(), dlock::ConfigError);
      dlock::LockOptions lockOptions;
      lockOptions.leaseTime = lease;
      CHECK_THROWS_AS((void)dlock::LockBuilder().backend(f.backend).options(lockOptions).build(), dlock::ConfigError);
    }
    CHECK(f.backend->calls() == calls);
    try {
      (void)lock->tryLock("k", 1s, std::chrono::milliseconds::max());
    } catch (const dlock::InvalidArgumentError& e) {
      CHECK(std::string(e.what()).find("kMaxLeaseTime") != std::string::npos);
    }
    // The limit itself is a lease like any other, under the watchdog too.
    REQUIRE(lock->tryLock("k", 1s, dlock::kMaxLeaseTime));
    CHECK(f.backend->inspect("k").remaining == dlock::kMaxLeaseTime);
    f.clock->advance(dlock::kMaxLeaseTime - 1ms);
    CHECK(lock->isHeld("k"));
    lock->unlock("k");
    auto longest = dlock::LockBuilder().backend(f.backend).clock(f.clock).watchdogLease(dlock::kMaxLeaseTime).build();
    REQUIRE(longest->tryLock("k"));
    longest->unlock("k");
  }

  TEST_CASE("a key of exactly the limit is accepted") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    const std::string longest(dlock::kMaxKeyBytes, 'x');
    REQUIRE(lock->tryLock(longest));
    lock->unlock(longest);
  }

  TEST_CASE("bad builder options get ConfigError") {
    CHECK_THROWS_AS((void)dlock::LockBuilder().build(), dlock::ConfigError);
    auto backend = std::make_shared<dlock::MemoryOperator>();
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(backend).leaseTime(0ms).build(), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(backend).watchdogLease(-1ms).build(), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(backend).defaultKey("").build(), dlock::ConfigError);
  }

  TEST_CASE("keys with NUL, CRLF, spaces, braces and %s lock and unlock like any other") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    const std::vector<std::string> keys = {std::string("a\0b", 3), "line\r\nbreak", "with spaces", "{tag}", "%s%n%d",
                                           std::string("\0", 1), "\xff\xfe"};
    for (const auto& key : keys) {
      REQUIRE(lock->tryLock(key));
      CHECK(lock->isHeld(key));
    }
    CHECK(f.backend->size() == keys.size());
    // Prefixes of binary keys are distinct keys.
    CHECK_FALSE(lock->isHeld("a"));
    for (const auto& key : keys) lock->unlock(key);
    CHECK(f.backend->size() == 0);
  }

  TEST_CASE("one thread holding 100 keys unlocks each with its own token") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    std::set<std::string> tokens;
    for (int i = 0; i < 100; ++i) {
      const std::string key = "key:" + std::to_string(i);
      REQUIRE(lock->tryLock(key));
      tokens.insert(f.backend->holderOf(key));
    }
    CHECK(tokens.size() == 100);
    for (int i = 99; i >= 0; --i) {
      lock->unlock("key:" + std::to_string(i));  // a wrong token would raise LockLostError
      CHECK(f.backend->size() == static_cast<std::size_t>(i));
    }
    CHECK(lock->stats().lostLeases == 0);
  }

  TEST_CASE("reentrant lock x3 needs unlock x3") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    lock->lock("k");
    lock->lock("k");
    CHECK(lock->tryLock("k"));
    CHECK(lock->holdCount("k") == 3);
    const std::string token = f.backend->holderOf("k");
    lock->unlock("k");
    lock->unlock("k");
    CHECK(f.backend->holderOf("k") == token);  // still held: one hold left
    CHECK(lock->isHeld("k"));
    lock->unlock("k");
    CHECK(f.backend->holderOf("k").empty());
    CHECK_THROWS_AS(lock->unlock("k"), dlock::NotOwnerError);
    CHECK(lock->stats().acquisitions == 1);
    CHECK(lock->stats().reentries == 2);
  }

  TEST_CASE("unlock of a reentrant hold whose lease ended throws LockLostError and forgets every hold") {
    VirtualFixture f;
    SUBCASE("expired") {
      auto lock = f.leased(30s);
      lock->lock("k");
      lock->lock("k");
      lock->lock("k");
      f.clock->advance(30s);
      CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
      CHECK(lock->holdCount("k") == 0);
      CHECK_THROWS_AS(lock->unlock("k"), dlock::NotOwnerError);
      CHECK(lock->stats().lostLeases == 1);
    }
    SUBCASE("taken while held, under the watchdog") {
      auto lock = f.watched(30s);
      lock->lock("k");
      lock->lock("k");
      REQUIRE(f.backend->unlock("k", f.backend->holderOf("k")).released);
      f.clock->advance(10s);  // the watchdog finds it gone
      CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
      CHECK(lock->holdCount("k") == 0);
      CHECK(lock->stats().lostLeases == 1);
    }
    SUBCASE("quietly") {
      auto lock = f.leased(30s);
      lock->lock("k");
      lock->lock("k");
      f.clock->advance(30s);
      CHECK_FALSE(lock->unlockQuietly("k"));
      CHECK(lock->holdCount("k") == 0);
    }
  }

  TEST_CASE("reentry on an ended lease throws LockLostError") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    lock->lock("k");
    f.clock->advance(30s);
    CHECK_THROWS_AS(lock->lock("k"), dlock::LockLostError);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("two locks on one backend are independent holders of the same key") {
    VirtualFixture f;
    auto first = f.leased(30s);
    auto second = f.leased(30s);
    REQUIRE(first->tryLock("k"));
    CHECK_FALSE(second->tryLock("k"));  // same thread, different lock: no reentry across locks
    CHECK_THROWS_AS(second->unlock("k"), dlock::NotOwnerError);
    first->unlock("k");
  }

  TEST_CASE("fencing tokens strictly grow with each acquisition of a key") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    std::uint64_t previous = 0;
    for (int i = 0; i < 10; ++i) {
      lock->lock("k");
      const std::uint64_t token = lock->fencingToken("k");
      CHECK(token > previous);
      previous = token;
      lock->unlock("k");
    }
    CHECK_THROWS_AS((void)lock->fencingToken("k"), dlock::NotOwnerError);
    // An expired lease taken over also moves the counter forward.
    lock->lock("k");
    const auto before = lock->fencingToken("k");
    f.clock->advance(31s);
    std::uint64_t taken = 0;
    std::thread other([&] {
      lock->lock("k");
      taken = lock->fencingToken("k");
      lock->unlock("k");
    });
    other.join();
    CHECK(taken > before);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("a ConnectionError from the backend reaches the caller and leaves the holder unchanged") {
    VirtualFixture f;
    auto lock = f.leased(30s);

    SUBCASE("on an acquire that tries once: nothing is held") {
      f.backend->failNextCalls(1);
      CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
      CHECK(lock->holdCount("k") == 0);
      CHECK_FALSE(lock->isHeld("k"));
      CHECK(f.backend->size() == 0);
      CHECK(lock->tryLock("k"));  // and the lock works once the backend is back
      lock->unlock("k");
    }
    SUBCASE("on lock and tryLock with a timeout: ridden out while it lasts less than the wait") {
      // The outage's back-off is on the virtual clock.
      dlock::test::onVirtualTime(*f.clock, [&] {
        f.backend->failNextCalls(2);
        CHECK(lock->tryLock("k", 30s));
        lock->unlock("k");
        f.backend->failNextCalls(2);
        CHECK_NOTHROW(lock->lock("k"));
        lock->unlock("k");
      }, 10ms);
    }
    SUBCASE("on unlock: the hold stays, so unlock can be retried, but is not reported held") {
      REQUIRE(lock->tryLock("k"));
      const auto fence = lock->fencingToken("k");
      f.backend->failNextCalls(1);
      CHECK_THROWS_AS(lock->unlock("k"), dlock::ConnectionError);
      CHECK(lock->holdCount("k") == 1);
      CHECK_FALSE(lock->isHeld("k"));  // the release may have run: in doubt
      CHECK(lock->fencingToken("k") == fence);
      CHECK_FALSE(f.backend->holderOf("k").empty());
      lock->unlock("k");  // the retry releases it
      CHECK(f.backend->holderOf("k").empty());
      CHECK(lock->holdCount("k") == 0);
    }
    SUBCASE("on a reentrant unlock nothing is sent at all") {
      lock->lock("k");
      lock->lock("k");
      f.backend->failNextCalls(1);
      lock->unlock("k");  // count 2 -> 1, no call
      CHECK(lock->holdCount("k") == 1);
      CHECK_THROWS_AS(lock->unlock("k"), dlock::ConnectionError);  // now the failure lands
      lock->unlock("k");
    }
  }

  TEST_CASE("a failure after the acquire landed leaves nothing held, on the backend either") {
    VirtualFixture f;
    // Acquires, then fails as a later step of an acquire can (Sentinel's WAIT refused by the ACL).
    class FailingAfterAcquire final : public dlock::test::ForwardingOperator {
     public:
      using ForwardingOperator::ForwardingOperator;
      dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
        (void)inner_->lock(key, token, ttl);
        throw dlock::BackendError("dlock: forwarding://: refused after the acquire");
      }
    };
    auto lock = dlock::LockBuilder().backend(std::make_shared<FailingAfterAcquire>(f.backend)).clock(f.clock).build();
    CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::BackendError);
    CHECK(lock->holdCount("k") == 0);
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("the default-key overloads use the configured default key") {
    VirtualFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(30s).defaultKey("jobs").build();
    CHECK(lock->defaultKey() == "jobs");
    lock->lock();
    CHECK(lock->isHeld());
    CHECK(lock->isHeld("jobs"));
    CHECK(lock->tryLock());
    CHECK(lock->tryLock(10ms));
    CHECK(lock->holdCount("jobs") == 3);
    CHECK(lock->fencingToken() == lock->fencingToken("jobs"));
    lock->unlock();
    lock->unlock();
    lock->unlock();
    CHECK_FALSE(lock->isHeld());
  }

  TEST_CASE("a waiter gets the key as soon as the holder releases it") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = dlock::LockBuilder().backend(backend).leaseTime(60s).build();
    REQUIRE(lock->tryLock("k"));
    std::atomic<bool> acquired{false};
    std::thread waiter([&] {
      acquired = lock->tryLock("k", 30s);
      if (acquired) lock->unlock("k");
    });
    // The waiter found the key held twice (before and after queueing): it is waiting.
    CHECK(dlock::test::eventually([&] { return lock->stats().attempts >= 3; }));
    CHECK_FALSE(acquired.load());
    const auto released = std::chrono::steady_clock::now();
    lock->unlock("k");
    waiter.join();
    CHECK(acquired.load());
    CHECK(std::chrono::steady_clock::now() - released < 10s);  // well before the 60 s lease
  }

  TEST_CASE("stats count attempts, failed tries and waiting") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto other = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    CHECK_FALSE(other->tryLock("k"));
    const auto stats = other->stats();
    CHECK(stats.attempts == 1);
    CHECK(stats.failedTries == 1);
    CHECK(stats.acquisitions == 0);
    lock->unlock("k");
  }
}

namespace {

// A backend that grants shorter validity than the lease asked for, as Redlock does.
class ShortValidityOperator final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    auto result = inner_->lock(key, token, ttl);
    if (result.acquired) result.validity = ttl - 2s;
    return result;
  }
};

}  // namespace

TEST_SUITE("DistributedLock") {
  TEST_CASE("the local lease deadline honours the validity the backend reports") {
    VirtualFixture f;
    auto lock = dlock::LockBuilder()
                    .backend(std::make_shared<ShortValidityOperator>(f.backend))
                    .clock(f.clock)
                    .leaseTime(30s)
                    .build();
    REQUIRE(lock->tryLock("k"));
    f.clock->advance(28s - 1ms);
    CHECK(lock->isHeld("k"));
    f.clock->advance(1ms);
    CHECK_FALSE(lock->isHeld("k"));  // 2 s before the backend's own expiry
    CHECK(f.backend->inspect("k").held);
  }
}

namespace {

// A backend whose next release runs and then fails with ConnectionError: its reply was lost.
class LostReleaseReply final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  std::atomic<bool> loseNext{false};
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    const dlock::ReleaseResult result = inner_->unlock(key, token);
    if (loseNext.exchange(false)) throw dlock::ConnectionError("dlock: forwarding://: the reply was lost");
    return result;
  }
};

// A backend that retries each release as RedisOperator does after a reused connection
// failed: the first try ran but its reply was lost, so the retry finds the key gone and answers
// from the record that try left.
class RetriedRelease final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    (void)inner_->unlock(key, token);
    return inner_->unlock(key, token);
  }
};

// A backend whose next release is cut off before it ran (a pooled connection that had died).
class ReleaseCutOffBeforeItRan final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  std::atomic<bool> cutNext{false};
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    if (cutNext.exchange(false)) throw dlock::ConnectionError("dlock: forwarding://: the connection closed");
    return inner_->unlock(key, token);
  }
};

}  // namespace

TEST_SUITE("DistributedLock") {
  TEST_CASE("an unlock retried after its reply was lost reports released while the backend keeps its record, then lost") {
    VirtualFixture f;
    auto backend = std::make_shared<LostReleaseReply>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).leaseTime(30s).build();
    REQUIRE(lock->tryLock("k"));
    backend->loseNext = true;
    CHECK_THROWS_AS(lock->unlock("k"), dlock::ConnectionError);
    CHECK(lock->holdCount("k") == 1);        // kept for a retry ...
    CHECK(f.backend->holderOf("k").empty());  // ... although the release ran
    SUBCASE("retried within the lease") {
      f.clock->advance(30s - 1ms);
      CHECK_NOTHROW(lock->unlock("k"));  // the backend's record: the lost try released it
      CHECK(lock->stats().lostLeases == 0);
    }
    SUBCASE("retried after the lease") {
      f.clock->advance(30s);  // the record ended with the lease: nothing says the release ran
      CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    }
    CHECK(lock->holdCount("k") == 0);
  }

  TEST_CASE("a release the backend retried after its first try ran is released by the backend's record") {
    VirtualFixture f;
    auto lock = dlock::LockBuilder()
                    .backend(std::make_shared<RetriedRelease>(f.backend))
                    .clock(f.clock)
                    .leaseTime(30s)
                    .build();
    REQUIRE(lock->tryLock("k"));
    CHECK_NOTHROW(lock->unlock("k"));
    CHECK(lock->stats().lostLeases == 0);
    dlock::Lease lease = lock->acquire("k");
    f.clock->advance(30s);  // ended: past its deadline the section was not protected
    CHECK_THROWS_AS(lease.release(), dlock::LockLostError);
  }

  TEST_CASE("a valid lease whose key the backend lost and another took: unlock reports LockLostError") {
    VirtualFixture f;
    auto backend = std::make_shared<ReleaseCutOffBeforeItRan>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).leaseTime(30s).build();
    auto other = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(30s).build();
    std::atomic<int> lostReports{0};
    REQUIRE(lock->tryLock("k"));
    SUBCASE("released after the loss") {
      f.backend->forgetLeases();  // a restart without persistence
      REQUIRE(other->tryLock("k"));
      CHECK(lock->isHeld("k"));  // locally valid: only the server can tell
    }
    SUBCASE("released in doubt, then retried after the loss") {
      backend->cutNext = true;
      CHECK_THROWS_AS(lock->unlock("k"), dlock::ConnectionError);  // nothing ran
      f.backend->forgetLeases();
      REQUIRE(other->tryLock("k"));
      CHECK_FALSE(lock->isHeld("k"));  // its release in doubt: not reported held
    }
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    CHECK(lock->holdCount("k") == 0);
    CHECK(lock->stats().lostLeases == 1);
    CHECK(other->isHeld("k"));
    CHECK(f.backend->holderOf("k") != "");
    other->unlock("k");
  }
}

TEST_SUITE("DistributedLock") {
  TEST_CASE("tryLock with a timeout rides out an outage shorter than its timeout, and counts the retries") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    // The first attempt and its clean-up (a cancel of its token) meet the outage; the clean-up's
    // retry on the cleanup lane runs when it will, so the outage is no longer than that.
    f.backend->failNextCalls(2);
    dlock::test::onVirtualTime(*f.clock, [&] {  // the back-off is on the virtual clock
      CHECK(lock->tryLock("k", 30s));
      CHECK(lock->stats().outageRetries == 1);
      lock->unlock("k");
    }, 10ms);
  }

  TEST_CASE("tryLock with a timeout throws ConnectionError when its budget ends unreachable, naming the cause") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    f.backend->failNextCalls(1000000);
    const auto start = f.clock->now();
    std::string message;
    dlock::test::onVirtualTime(*f.clock, [&] {  // the back-off is on the virtual clock
      try {
        (void)lock->tryLock("k", 300ms);
      } catch (const dlock::ConnectionError& error) {
        message = error.what();
      }
      CHECK(lock->holdCount("k") == 0);
    }, 10ms);
    CHECK(f.clock->now() - start >= 300ms);  // it tried to the end of its budget
    CHECK(message.find("lock 'k' on memory://: the backend stayed unreachable for") != std::string::npos);
    CHECK(message.find("injected connection failure") != std::string::npos);
    CHECK(lock->stats().outageRetries > 0);
    f.backend->failNextCalls(0);
  }

  TEST_CASE("tryLock without a timeout does not retry: ConnectionError from its one attempt") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    f.backend->failNextCalls(1);
    CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
    CHECK(lock->stats().attempts == 1);
    CHECK(lock->stats().outageRetries == 0);
  }

  TEST_CASE("lock without a timeout gives up after the outage tolerance, and rides out a shorter outage") {
    VirtualFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(30s).outageTolerance(200ms).build();
    dlock::test::onVirtualTime(*f.clock, [&] {  // the tolerance and the back-off are on the virtual clock
      f.backend->failNextCalls(1000000);
      CHECK_THROWS_AS(lock->lock("k"), dlock::ConnectionError);
      f.backend->failNextCalls(2);
      CHECK_NOTHROW(lock->lock("k"));
      CHECK(lock->isHeld("k"));
      lock->unlock("k");
    }, 10ms);
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(f.backend).outageTolerance(-1ms).build(), dlock::ConfigError);
  }
}
