#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "LogCapture.h"
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
  std::vector<bool> extendAll(const std::vector<dlock::LeaseRef>&, std::chrono::milliseconds) override {
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
