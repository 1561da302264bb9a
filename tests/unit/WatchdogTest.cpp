// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "LogCapture.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

TEST_SUITE("Watchdog") {
  TEST_CASE("a critical section 5x longer than the lease keeps the key with the watchdog") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    REQUIRE(lock->tryLock("k"));
    for (int step = 0; step < 15; ++step) {  // 15 x 10 s = 150 s = 5 leases
      f.clock->advance(10s);
      CHECK(lock->isHeld("k"));
      CHECK(f.backend->inspect("k").held);
    }
    lock->unlock("k");  // no LockLostError: the lease never lapsed
    CHECK(lock->stats().renewals >= 15);
    CHECK(lock->stats().lostLeases == 0);
  }

  TEST_CASE("the same section without the watchdog loses the key at its lease") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    REQUIRE(lock->tryLock("k"));
    for (int step = 0; step < 15; ++step) f.clock->advance(10s);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK_FALSE(f.backend->inspect("k").held);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("renewal stops at unlock") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    REQUIRE(lock->tryLock("k"));
    f.clock->advance(10s);
    lock->unlock("k");
    const auto renewals = lock->stats().renewals;
    for (int step = 0; step < 5; ++step) f.clock->advance(10s);
    CHECK(lock->stats().renewals == renewals);
    CHECK(lock->stats().lostLeases == 0);
  }

  TEST_CASE("renewals of many keys go in one batch per interval") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    for (int i = 0; i < 1000; ++i) REQUIRE(lock->tryLock("key:" + std::to_string(i)));
    const auto callsBefore = f.backend->calls();
    for (int step = 0; step < 3; ++step) f.clock->advance(10s);
    const auto stats = lock->stats();
    CHECK(stats.renewalRoundTrips == 3);
    CHECK(stats.renewals == 3000);
    CHECK(f.backend->calls() - callsBefore == 3);
    for (int i = 0; i < 1000; ++i) lock->unlock("key:" + std::to_string(i));
  }

  TEST_CASE("a lease taken over behind our back is reported lost within one interval") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    std::mutex seenMutex;
    std::vector<std::string> lostKeys;
    std::uint64_t lostFence = 0;
    lock->onLockLost([&](std::string_view key, std::uint64_t fence) {
      std::lock_guard<std::mutex> guard(seenMutex);
      lostKeys.emplace_back(key);
      lostFence = fence;
    });
    dlock::test::LogCapture log;
    REQUIRE(lock->tryLock("k"));
    const auto fence = lock->fencingToken("k");
    // Someone deletes the key and another owner takes it (an operator's mistake, a failover).
    auto intruder = f.leased(60s);
    std::thread other([&] {
      // Wait out our lease on the backend by forging its expiry: unlock with our token.
      CHECK(f.backend->unlock("k", f.backend->holderOf("k")).released);
      CHECK(intruder->tryLock("k"));
    });
    other.join();
    CHECK(lock->isHeld("k"));  // the client cannot know before the watchdog looks
    f.clock->advance(10s);     // one interval
    CHECK_FALSE(lock->isHeld("k"));
    // The handler runs on a thread of its own, never on the renewal path.
    REQUIRE(dlock::test::eventually([&] {
      std::lock_guard<std::mutex> guard(seenMutex);
      return !lostKeys.empty();
    }));
    {
      std::lock_guard<std::mutex> guard(seenMutex);
      REQUIRE(lostKeys.size() == 1);
      CHECK(lostKeys[0] == "k");
      CHECK(lostFence == fence);
    }
    CHECK(log.text().find("lost the lease of 'k'") != std::string::npos);
    CHECK(lock->stats().lostLeases == 1);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("renewal failures past the lease end mark the lease lost") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    dlock::test::LogCapture log;
    REQUIRE(lock->tryLock("k"));
    f.backend->failNextCalls(3);
    f.clock->advance(10s);
    CHECK(lock->isHeld("k"));  // one failure: still inside the lease
    f.clock->advance(10s);
    CHECK(lock->isHeld("k"));
    f.clock->advance(10s);  // third failure at the lease end
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(lock->stats().renewalFailures == 3);
    CHECK(log.text().find("injected connection failure") != std::string::npos);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("a renewal failure that recovers in time keeps the lease") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    REQUIRE(lock->tryLock("k"));
    f.backend->failNextCalls(1);  // renewing every third of the lease tolerates one miss
    for (int step = 0; step < 6; ++step) {
      f.clock->advance(10s);
      CHECK(lock->isHeld("k"));
    }
    lock->unlock("k");
  }

  TEST_CASE("a thread that exits holding a key stops its renewal") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    dlock::test::LogCapture log;
    std::thread holder([&] { CHECK(lock->tryLock("k")); });
    holder.join();
    CHECK(log.text().find("a thread ended holding 'k'") != std::string::npos);
    for (int step = 0; step < 3; ++step) f.clock->advance(10s);
    CHECK_FALSE(f.backend->inspect("k").held);  // expired instead of renewed forever
  }
}

namespace {

// A backend whose renewals never get through although the server keeps the keys (a network
// path that fails for the watchdog while the server is fine, with leases longer than we think).
class UnrenewableOperator final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->lock(key, token, ttl * 10);
  }
  bool extend(std::string_view, std::string_view, std::chrono::milliseconds) override {
    throw dlock::ConnectionError("renewal path down");
  }
  std::vector<dlock::ExtendResult> extendAll(const std::vector<dlock::LeaseRef>&, std::chrono::milliseconds) override {
    throw dlock::ConnectionError("renewal path down");
  }
};

}  // namespace

TEST_SUITE("Watchdog") {
  TEST_CASE("unlock of a lease lost to failed renewals still deletes it where the backend kept it") {
    VirtualFixture f;
    auto backend = std::make_shared<UnrenewableOperator>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).watchdogLease(30s).build();
    dlock::test::LogCapture log;
    REQUIRE(lock->tryLock("k"));
    for (int step = 0; step < 3; ++step) f.clock->advance(10s);
    CHECK_FALSE(lock->isHeld("k"));              // lost locally at the lease end
    CHECK(f.backend->inspect("k").held);         // but the server still has it
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    CHECK_FALSE(f.backend->inspect("k").held);   // deleted, so nobody waits out its TTL
    CHECK(log.text().find("renewal path down") != std::string::npos);
  }
}

TEST_SUITE("Watchdog") {
  TEST_CASE("a lost handler that drops the last reference to its lock does not end the process") {
    VirtualFixture f;
    std::shared_ptr<dlock::ILock> lock = f.watched(30s);
    std::atomic<int> reports{0};
    dlock::test::Event dropped;
    lock->onLockLost([&lock, &reports, &dropped](std::string_view, std::uint64_t) {
      ++reports;
      lock.reset();  // the lock, its core and its watchdog go now, on the handler's own thread
      dropped.set();
    });
    REQUIRE(lock->tryLock("k"));
    REQUIRE(lock->tryLock("k2"));
    // Both keys are taken away behind our back: one renewal finds both gone.
    REQUIRE(f.backend->unlock("k", f.backend->holderOf("k")).released);
    REQUIRE(f.backend->unlock("k2", f.backend->holderOf("k2")).released);
    f.clock->advance(10s);
    REQUIRE(dropped.wait());
    CHECK(lock == nullptr);
    CHECK(reports == 1);  // the lock was gone before the second report: nobody to tell
    const auto calls = f.backend->calls();
    for (int step = 0; step < 3; ++step) f.clock->advance(10s);
    CHECK(f.backend->calls() == calls);  // nothing renews any more
  }

  TEST_CASE("a lost handler that drops a lease which outlived its lock does not end the process") {
    VirtualFixture f;
    std::optional<dlock::Lease> lease;
    std::atomic<int> reports{0};
    dlock::test::Event dropped;
    {
      auto lock = f.watched(30s);
      lock->onLockLost([&lease, &reports, &dropped](std::string_view, std::uint64_t) {
        ++reports;
        lease.reset();  // its release fails (lost), then it drops the last reference to the core
        dropped.set();
      });
      lease = lock->acquire("k");
      REQUIRE(*lease);
    }  // the lock object is gone; the lease keeps its core and watchdog alive
    REQUIRE(f.backend->unlock("k", f.backend->holderOf("k")).released);
    f.clock->advance(10s);
    REQUIRE(dropped.wait());
    CHECK(reports == 1);
    CHECK_FALSE(lease.has_value());
    CHECK(f.backend->size() == 0);
  }
}

namespace {

// Forces the race of a renewal and the release of the same lease: once armed, a renewal waits
// until the release has run on the backend (the key is gone when it arrives), and the release
// returns only once the watchdog has judged that renewal's answer.
class RenewalBehindRelease final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;

  std::atomic<bool> armed{false};
  dlock::test::Event renewalSent;     // the armed renewal is on its way
  dlock::test::Event released;        // the release has run
  dlock::test::Event renewalJudged;   // the watchdog has handled the renewal's answer (set by the test)

  std::vector<dlock::ExtendResult> extendAll(const std::vector<dlock::LeaseRef>& leases,
                                             std::chrono::milliseconds ttl) override {
    if (armed.exchange(false)) {
      renewalSent.set();
      CHECK(released.wait());
    }
    return inner_->extendAll(leases, ttl);
  }
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    const dlock::ReleaseResult result = inner_->unlock(key, token);
    released.set();
    CHECK(renewalJudged.wait());
    return result;
  }
};

}  // namespace

TEST_SUITE("Watchdog") {
  TEST_CASE("a renewal that reaches the backend after the release of its lease does not report it lost") {
    VirtualFixture f;
    auto backend = std::make_shared<RenewalBehindRelease>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).watchdogLease(30s).build();
    std::atomic<int> reports{0};
    lock->onLockLost([&reports](std::string_view, std::uint64_t) { ++reports; });
    REQUIRE(lock->tryLock("k"));
    backend->armed = true;
    std::thread ticker([&] {
      f.clock->advance(10s);  // returns once the watchdog has handled this tick's renewal
      backend->renewalJudged.set();
    });
    REQUIRE(backend->renewalSent.wait());
    CHECK_NOTHROW(lock->unlock("k"));  // runs on the backend while the renewal waits
    ticker.join();
    CHECK(reports == 0);
    CHECK(lock->stats().lostLeases == 0);
    CHECK(lock->holdCount("k") == 0);
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("after an unlock fails with ConnectionError the lease is renewed, not reported held, and a real loss still reported") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    std::atomic<int> reports{0};
    lock->onLockLost([&reports](std::string_view, std::uint64_t) { ++reports; });
    REQUIRE(lock->tryLock("k"));
    f.backend->failNextCalls(1);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::ConnectionError);  // the hold stays
    for (int step = 0; step < 6; ++step) {  // 60 s: two leases, renewed
      f.clock->advance(10s);
      CHECK_FALSE(lock->isHeld("k"));  // the release may still run: in doubt, not held
    }
    CHECK(lock->stats().renewals == 6);
    // The key is taken away. That failed unlock might have removed it, so a renewal finding it
    // gone proves nothing at once; once the lease has run out unrenewed, it is lost.
    REQUIRE(f.backend->unlock("k", f.backend->holderOf("k")).released);
    for (int step = 0; step < 3; ++step) f.clock->advance(10s);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(dlock::test::eventually([&] { return reports == 1; }));
    CHECK(lock->stats().lostLeases == 1);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }
}

namespace {

// A backend whose renewals cannot reach the node serving the keys in `unreachable`: those come
// back unknown, the others are renewed as usual (one node of several failing).
class OneNodeDown final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  std::vector<std::string> unreachable;
  std::vector<dlock::ExtendResult> extendAll(const std::vector<dlock::LeaseRef>& leases,
                                             std::chrono::milliseconds ttl) override {
    std::vector<dlock::LeaseRef> reachable;
    for (const auto& lease : leases) {
      if (!isUnreachable(lease.key)) reachable.push_back(lease);
    }
    const auto renewed = inner_->extendAll(reachable, ttl);
    std::vector<dlock::ExtendResult> results;
    std::size_t next = 0;
    for (const auto& lease : leases) {
      results.push_back(isUnreachable(lease.key) ? dlock::ExtendResult{false, true, {}} : renewed[next++]);
    }
    return results;
  }

 private:
  bool isUnreachable(std::string_view key) const {
    return std::find(unreachable.begin(), unreachable.end(), key) != unreachable.end();
  }
};

}  // namespace

TEST_SUITE("Watchdog") {
  TEST_CASE("a lease whose renewals keep failing is reported lost at its own deadline, not at the next tick") {
    VirtualFixture f;
    auto lock = f.watched(30s);  // each lease renewed 10 s after its last renewal
    std::mutex seenMutex;
    std::vector<std::string> lost;
    lock->onLockLost([&](std::string_view key, std::uint64_t) {
      std::lock_guard<std::mutex> guard(seenMutex);
      lost.emplace_back(key);
    });
    REQUIRE(lock->tryLock("a"));  // t = 0: deadline 30 s, due at 10 s
    f.clock->advance(4s);
    REQUIRE(lock->tryLock("b"));     // t = 4 s: deadline 34 s, due at 14 s
    f.backend->failNextCalls(1000);  // the backend is down from now on: no renewal lands
    f.clock->advance(26s);           // t = 30 s
    CHECK_FALSE(lock->isHeld("a"));
    CHECK(lock->isHeld("b"));
    CHECK(lock->stats().lostLeases == 1);
    f.clock->advance(4s - 1ms);  // t = 34 s - 1 ms
    CHECK(lock->isHeld("b"));
    CHECK(lock->stats().lostLeases == 1);
    f.clock->advance(1ms);  // t = 34 s: b's own deadline
    CHECK_FALSE(lock->isHeld("b"));
    CHECK(lock->stats().lostLeases == 2);  // counted by the watchdog at the deadline
    CHECK(dlock::test::eventually([&] {
      std::lock_guard<std::mutex> guard(seenMutex);
      return lost == std::vector<std::string>{"a", "b"};
    }));
    f.backend->failNextCalls(0);
  }

  TEST_CASE("renewals that one node cannot answer touch only the leases it serves") {
    VirtualFixture f;
    auto backend = std::make_shared<OneNodeDown>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).watchdogLease(30s).build();
    std::atomic<int> reports{0};
    lock->onLockLost([&reports](std::string_view, std::uint64_t) { ++reports; });
    REQUIRE(lock->tryLock("b"));
    REQUIRE(lock->tryLock("c"));
    backend->unreachable = {"c"};
    for (int step = 0; step < 2; ++step) f.clock->advance(10s);
    CHECK(lock->isHeld("b"));
    CHECK(lock->isHeld("c"));  // unknown, inside its lease: not lost yet
    f.clock->advance(10s);     // c's deadline
    CHECK(lock->isHeld("b"));  // renewed all along
    CHECK(f.backend->inspect("b").held);
    CHECK_FALSE(lock->isHeld("c"));
    CHECK(lock->stats().lostLeases == 1);
    CHECK(dlock::test::eventually([&] { return reports == 1; }));
    CHECK_NOTHROW(lock->unlock("b"));
    CHECK_THROWS_AS(lock->unlock("c"), dlock::LockLostError);
  }

  TEST_CASE("a slow lost handler delays no renewal of the other leases") {
    VirtualFixture f;
    auto lock = f.watched(30s);
    dlock::test::Event handlerEntered;
    dlock::test::Event handlerMayReturn;
    lock->onLockLost([&](std::string_view, std::uint64_t) {
      handlerEntered.set();
      CHECK(handlerMayReturn.wait());
    });
    REQUIRE(lock->tryLock("lost"));
    REQUIRE(lock->tryLock("kept"));
    REQUIRE(f.backend->unlock("lost", f.backend->holderOf("lost")).released);  // taken behind our back
    f.clock->advance(10s);
    REQUIRE(handlerEntered.wait());  // the handler now blocks
    const auto renewals = lock->stats().renewals;
    for (int step = 0; step < 6; ++step) f.clock->advance(10s);  // two leases
    CHECK(lock->stats().renewals == renewals + 6);
    CHECK(lock->isHeld("kept"));
    CHECK(f.backend->inspect("kept").held);
    handlerMayReturn.set();
    lock->unlock("kept");
  }

  TEST_CASE("renewal failures warn once per interval per lock, naming the lock and the cause, and count the rest") {
    VirtualFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).watchdogLease(30s).name("payments").build();
    dlock::test::LogCapture log;
    const auto warnings = [&log] {
      const std::string text = log.text();
      std::size_t count = 0;
      for (auto at = text.find("each is lost at its own deadline"); at != std::string::npos;
           at = text.find("each is lost at its own deadline", at + 1)) {
        ++count;
      }
      return count;
    };
    REQUIRE(lock->tryLock("k"));
    f.backend->failNextCalls(1000);  // a server down for longer than the lease
    // Second by second until just before the lease ends: the renewal fails, then its retries at
    // a quarter of what is left. A warning is given at the first failure, and then only once
    // kRenewalWarningInterval has passed since the last, saying how many it left out.
    std::vector<int> warnedAt;                 // the seconds at whose step a warning came
    std::vector<std::uint64_t> failuresBefore;  // the failures counted before each of those steps
    std::uint64_t failures = 0;
    for (int second = 1; second < 30; ++second) {
      f.clock->advance(1s);
      if (warnings() > warnedAt.size()) {
        warnedAt.push_back(second);
        failuresBefore.push_back(failures);
      }
      failures = lock->stats().renewalFailures;
    }
    CHECK(failures >= 4);
    REQUIRE_MESSAGE(warnedAt.size() >= 2, log.text());
    CHECK(warnedAt.size() < failures);
    CHECK(failuresBefore[0] == 0);  // the first failure warns
    for (std::size_t i = 1; i < warnedAt.size(); ++i) {
      CHECK(warnedAt[i] - warnedAt[i - 1] >= 9);  // 10 s apart, as seen at 1 s steps
      const std::uint64_t leftOut = failuresBefore[i] - failuresBefore[i - 1] - 1;
      CHECK_MESSAGE(log.text().find("(" + std::to_string(leftOut) + " more renewal failure(s) since the last warning, "
                                    "not logged") != std::string::npos,
                    log.text());
    }
    CHECK(log.text().find("dlock: lock 'payments': renewing 1 of 1 lease(s) on memory:// failed: dlock: memory://: "
                          "injected connection failure; each is lost") != std::string::npos);
    CHECK(lock->isHeld("k"));  // still inside its lease
  }
}
