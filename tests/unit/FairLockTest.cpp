// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "TestHelpers.h"
#include "dlock/MutexHandle.h"
#include "dlock/macros.h"
#include "dlock/LockError.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/redlock/RedlockOperator.h"
#include "dlock/sentinel/SentinelOperator.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

namespace {

const std::string kA(32, 'a');
const std::string kB(32, 'b');
const std::string kC(32, 'c');

struct FairFixture : VirtualFixture {
  std::shared_ptr<dlock::ILock> fair(std::chrono::milliseconds lease = 10s) const {
    return dlock::LockBuilder().backend(backend).clock(clock).leaseTime(lease).fair().build();
  }
};

// Blocks (real time, bounded) until `backend` has `count` waiters queued for `key`.
bool waitForQueue(const dlock::MemoryOperator& backend, std::string_view key, std::size_t count) {
  const auto give = std::chrono::steady_clock::now() + 10s;
  while (backend.queued(key) != count) {
    if (std::chrono::steady_clock::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_SUITE("FairLock") {
  TEST_CASE("the release hands the key to the head waiter, who owns it at once") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    const auto b = op.fairLock("k", kB, 10s, 5s);
    const auto c = op.fairLock("k", kC, 10s, 5s);
    CHECK_FALSE(b.acquired);
    CHECK(b.position == 1);
    CHECK(c.position == 2);
    CHECK(b.holderTtl == 10s);
    auto watchB = op.watchGrants("k", kB);
    const dlock::ReleaseResult released = op.fairUnlock("k", kA);
    CHECK(released.released);
    CHECK(released.notified == 1);
    CHECK(op.holderOf("k") == kB);
    const dlock::Grant grant = watchB->waitForGrant(0ms);
    REQUIRE(grant.kind == dlock::Grant::Kind::Granted);
    // Idempotent for the owner: a recheck after a lost message finds the same grant.
    const auto again = op.fairLock("k", kB, 10s, 5s);
    CHECK(again.acquired);
    CHECK(again.fencingToken == grant.fencingToken);
    CHECK(op.fairUnlock("k", kB).notified == 1);
    CHECK(op.holderOf("k") == kC);
    CHECK(op.fairUnlock("k", kC).notified == 0);
    CHECK(op.holderOf("k").empty());
    CHECK(op.queued("k") == 0);
  }

  TEST_CASE("a newcomer does not barge past the queue while the key is handed over") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 5s).acquired);
    (void)op.fairUnlock("k", kA);
    CHECK_FALSE(op.fairLock("k", kC, 10s, 0ms).acquired);  // tryLock once: B owns it now
    CHECK(op.queued("k") == 0);                               // and C was never queued
  }

  TEST_CASE("a waiter whose waiter lease ran out is skipped") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 1s).acquired);  // dies: never renews
    REQUIRE_FALSE(op.fairLock("k", kC, 10s, 5s).acquired);
    f.clock->advance(2s);
    CHECK(op.fairUnlock("k", kA).notified == 1);
    CHECK(op.holderOf("k") == kC);
  }

  TEST_CASE("a free key with a live head (its holder died) goes to the head on the next attempt") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 1s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 60s).acquired);
    f.clock->advance(2s);  // A's lease ends unreleased
    CHECK_FALSE(op.fairLock("k", kC, 10s, 60s).acquired);
    CHECK(op.holderOf("k") == kB);
  }

  TEST_CASE("leaving after a hand-off raced the timeout passes the key on") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kC, 10s, 5s).acquired);
    (void)op.fairUnlock("k", kA);
    REQUIRE(op.holderOf("k") == kB);
    CHECK(op.leaveQueue("k", kB, 10s));
    CHECK(op.holderOf("k") == kC);
    CHECK_FALSE(op.leaveQueue("k", kA, 10s));
  }

  TEST_CASE("a retried release is told it ran earlier") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE(op.fairUnlock("k", kA).released);
    const dlock::ReleaseResult retried = op.fairUnlock("k", kA);
    CHECK(retried.released);
    CHECK(retried.releasedEarlier);
    CHECK_FALSE(op.fairUnlock("k", kB).released);
  }

  TEST_CASE("threads get the key in the order they queued, with rising fencing tokens") {
    FairFixture f;
    auto lock = f.fair();
    lock->lock("k");
    std::mutex mutex;
    std::vector<int> order;
    std::vector<std::uint64_t> fences;
    std::vector<std::thread> waiters;
    for (int i = 0; i < 5; ++i) {
      waiters.emplace_back([&, i] {
        lock->lock("k");
        {
          std::lock_guard<std::mutex> guard(mutex);
          order.push_back(i);
          fences.push_back(lock->fencingToken("k"));
        }
        lock->unlock("k");
      });
      REQUIRE(waitForQueue(*f.backend, "k", static_cast<std::size_t>(i + 1)));  // i queued before i + 1 starts
    }
    lock->unlock("k");
    for (auto& waiter : waiters) waiter.join();
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4});
    for (std::size_t i = 1; i < fences.size(); ++i) CHECK(fences[i] > fences[i - 1]);
    CHECK(f.backend->queued("k") == 0);
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("reentrant: the same thread locks again and releases at count zero") {
    FairFixture f;
    auto lock = f.fair();
    lock->lock("k");
    CHECK(lock->tryLock("k", 0ms));
    lock->unlock("k");
    CHECK(lock->isHeld("k"));
    lock->unlock("k");
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(f.backend->holderOf("k").empty());
    CHECK_THROWS_AS(lock->unlock("k"), dlock::NotOwnerError);
  }

  TEST_CASE("tryLock once on a held key fails without queueing, and a timed-out wait leaves the queue") {
    FairFixture f;
    auto holder = f.fair();
    auto other = f.fair();
    holder->lock("k");
    std::atomic<bool> once{true};
    std::thread([&] { once = other->tryLock("k", 0ms); }).join();
    CHECK_FALSE(once);
    CHECK(f.backend->queued("k") == 0);
    std::atomic<bool> waited{true};
    dlock::test::onVirtualTime(*f.clock, [&] { waited = other->tryLock("k", 20ms); }, 5ms);
    CHECK_FALSE(waited);
    CHECK(f.backend->queued("k") == 0);
    holder->unlock("k");
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("a lost hand-off message is recovered by the waiter's recheck") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 5s).acquired);
    (void)op.fairUnlock("k", kA);  // B had no watch yet: the message is lost
    const auto recheck = op.fairLock("k", kB, 10s, 5s);
    CHECK(recheck.acquired);
    CHECK(recheck.validity > 0ms);
  }

  TEST_CASE("fair(true) on Redlock is a ConfigError that says why") {
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (int i = 0; i < 3; ++i) members.push_back(std::make_shared<dlock::MemoryOperator>());
    auto redlock = std::make_shared<dlock::RedlockOperator>(members);
    CHECK_THROWS_WITH_AS(dlock::LockBuilder().backend(redlock).fair().build(),
                         doctest::Contains("no single queue"), dlock::ConfigError);
    CHECK_THROWS_AS(dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).fair().waiterLease(1ms).build(),
                    dlock::ConfigError);
  }

  TEST_CASE("the std adapters and the macros work on a fair lock") {
    FairFixture f;
    auto lock = f.fair();
    {
      auto handle = lock->mutex("k");
      std::unique_lock<dlock::MutexHandle> guard(handle, std::chrono::seconds(1));
      REQUIRE(guard);
      CHECK(f.backend->holderOf("k").size() > 0);
    }
    CHECK(f.backend->holderOf("k").empty());
    {
      DISTRIBUTED_LOCK_WITH(lock, "m");
      CHECK(lock->isHeld("m"));
    }
    CHECK_FALSE(lock->isHeld("m"));
  }

  TEST_CASE("a fair lease taken behind the holder's back is reported lost, and unlock says so") {
    FairFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).watchdogLease(30s).fair().build();
    std::atomic<int> lost{0};
    lock->onLockLost([&](std::string_view, std::uint64_t) { ++lost; });
    REQUIRE(lock->tryLock("k", 0ms));
    f.backend->forgetLeases();  // the server restarted empty
    f.clock->advance(10s);      // one renewal: the lease is gone
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(dlock::test::eventually([&] { return lost.load() == 1; }));
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("a waiter handed the key while its waiter lease runs low holds it for the rest only, then extends") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 3s).acquired);
    auto watch = op.watchGrants("k", kB);
    f.clock->advance(2s);
    (void)op.fairUnlock("k", kA);
    const dlock::Grant grant = watch->waitForGrant(0ms);
    REQUIRE(grant.kind == dlock::Grant::Kind::Granted);
    CHECK(grant.lease == 1s);  // what was left of B's 3 s place, not its 10 s ttl
    f.clock->advance(1500ms);
    CHECK(op.holderOf("k").empty());  // B died: the key is free after the claim, not after 10 s
  }

  TEST_CASE("fair(true) with wait_replicas builds: a hand-off counts once its grantee's extend is acknowledged") {
    dlock::SentinelOptions options;
    options.sentinels.push_back({"127.0.0.1", 1});
    options.masterName = "mymaster";
    options.waitReplicas = 1;
    auto sentinel = std::make_shared<dlock::SentinelOperator>(options);  // contacts nothing yet
    CHECK(sentinel->fairUnsupported().empty());
    CHECK_NOTHROW((void)dlock::LockBuilder().backend(sentinel).fair().build());
  }
}

namespace {

// A MemoryOperator's fair queue whose hand-off messages can be held back, as if the waiter's
// process were paused (SIGSTOP) with the message waiting in its socket.
class PausingFairOperator final : public dlock::test::ForwardingOperator, public dlock::IFairOperator {
 public:
  using ForwardingOperator::ForwardingOperator;

  dlock::FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                                    std::chrono::milliseconds waiterLease) override {
    attempts.fetch_add(1);
    return inner_->fairLock(key, token, ttl, waiterLease);
  }
  dlock::ReleaseResult fairUnlock(std::string_view key, std::string_view token) override {
    return inner_->fairUnlock(key, token);
  }
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->leaveQueue(key, token, ttl);
  }
  // Single extends (a claim's) fail while `failingExtends` is above zero; batch renewals pass.
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    if (failingExtends.fetch_sub(1) > 0) throw dlock::ConnectionError("dlock: extend reset on the wire");
    return inner_->extend(key, token, ttl);
  }
  std::unique_ptr<dlock::IGrantWatch> watchGrants(std::string_view key, std::string_view token) override {
    return std::make_unique<Watch>(*this, inner_->watchGrants(key, token));
  }

  void pause() { paused.store(true); }
  void resume() {
    paused.store(false);
    resumed.set();
  }

  std::atomic<bool> paused{false};
  std::atomic<int> attempts{0};
  std::atomic<int> failingExtends{0};
  dlock::test::Event listening;  // the waiter is listening for its hand-off while paused
  dlock::test::Event heard;      // a hand-off reached the paused waiter
  dlock::test::Event resumed;

 private:
  class Watch final : public dlock::IGrantWatch {
   public:
    Watch(PausingFairOperator& owner, std::unique_ptr<dlock::IGrantWatch> inner)
        : owner_(owner), inner_(std::move(inner)) {}
    dlock::Grant waitForGrant(std::chrono::milliseconds timeout) override {
      if (owner_.paused.load()) {
        // Paused, the waiter listens until its hand-off comes: a try of its own in between would
        // find the key handed over and take it without hearing the message.
        owner_.listening.set();
        dlock::Grant grant;
        while (grant.kind == dlock::Grant::Kind::None) grant = inner_->waitForGrant(timeout);
        if (grant.kind == dlock::Grant::Kind::Granted) {
          owner_.heard.set();
          (void)owner_.resumed.wait();  // the message sits unread while the waiter is paused
        }
        return grant;
      }
      dlock::Grant grant = inner_->waitForGrant(timeout);
      if (grant.kind == dlock::Grant::Kind::Granted && owner_.paused.load()) {
        owner_.heard.set();
        (void)owner_.resumed.wait();  // the message sits unread while the waiter is paused
      }
      return grant;
    }

   private:
    PausingFairOperator& owner_;
    std::unique_ptr<dlock::IGrantWatch> inner_;
  };
};

}  // namespace

TEST_SUITE("FairLock") {
  TEST_CASE("a waiter paused past its hand-off's claim does not return from lock() while another holds the key") {
    FairFixture f;
    auto& op = *f.backend;
    auto pausing = std::make_shared<PausingFairOperator>(f.backend);
    auto lock = dlock::LockBuilder().backend(pausing).clock(f.clock).leaseTime(10s).waiterLease(1500ms).fair().build();
    REQUIRE(op.fairLock("f", kA, 10s, 5s).acquired);  // P holds f

    std::atomic<bool> returned{false};
    std::atomic<bool> heldByOtherOnReturn{false};
    std::thread waiter([&] {
      lock->lock("f");
      heldByOtherOnReturn.store(op.holderOf("f") == kC);
      returned.store(true);
      try {
        lock->unlock("f");
      } catch (const dlock::LockLostError&) {
        heldByOtherOnReturn.store(true);  // C's key: W's section was never protected
      }
    });
    REQUIRE(waitForQueue(op, "f", 1));
    REQUIRE_FALSE(op.fairLock("f", kC, 10s, 5s).acquired);  // C waits behind W
    pausing->pause();
    // W sleeps on the clock until its place's renewal (a third of its waiter lease): it renews,
    // and listens paused from then on.
    REQUIRE(f.clock->awaitSleepers(1));
    f.clock->advance(500ms);
    REQUIRE(pausing->listening.wait());
    REQUIRE(op.fairUnlock("f", kA).notified == 1);  // handed to W for a claim of its place's rest
    REQUIRE(pausing->heard.wait());
    f.clock->advance(2500ms);  // W stays paused; the claim runs out
    REQUIRE(op.fairLock("f", kC, 10s, 5s).acquired);  // C takes the key
    const int attemptsBefore = pausing->attempts.load();
    pausing->resume();
    // W either returns (wrongly, with C inside) or asks the server again and queues behind C.
    REQUIRE(dlock::test::eventually([&] { return returned.load() || pausing->attempts.load() > attemptsBefore; }));
    CHECK_FALSE(returned.load());
    CHECK(op.holderOf("f") == kC);
    REQUIRE(op.fairUnlock("f", kC).released);  // C leaves: now W gets it
    waiter.join();
    CHECK(returned.load());
    CHECK_FALSE(heldByOtherOnReturn.load());
  }

  TEST_CASE("a hand-off message does not outlive the attempt it answered: a later attempt that queues clears it") {
    FairFixture f;
    auto& op = *f.backend;
    REQUIRE(op.fairLock("k", kA, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 1500ms).acquired);
    REQUIRE_FALSE(op.fairLock("k", kC, 10s, 5s).acquired);
    auto watch = op.watchGrants("k", kB);
    (void)op.fairUnlock("k", kA);  // handed to B, who does not read it
    f.clock->advance(2s);           // B's claim (the rest of its place) ends
    REQUIRE(op.fairLock("k", kC, 10s, 5s).acquired);
    REQUIRE_FALSE(op.fairLock("k", kB, 10s, 1500ms).acquired);  // B asks again: queued behind C
    CHECK(watch->waitForGrant(0ms).kind == dlock::Grant::Kind::None);  // the old hand-off is gone
  }
}

TEST_SUITE("FairLock") {
  TEST_CASE("a hand-off whose claim extend fails is renewed by the watchdog before the claim ends") {
    FairFixture f;
    auto& op = *f.backend;
    auto pausing = std::make_shared<PausingFairOperator>(f.backend);
    auto lock =
        dlock::LockBuilder().backend(pausing).clock(f.clock).watchdogLease(30s).waiterLease(3s).fair().build();
    REQUIRE(op.fairLock("f", kA, 10s, 5s).acquired);
    dlock::test::Event acquired;
    dlock::test::Event advanced;
    std::atomic<bool> heldAfter{false};
    std::atomic<bool> unlocked{false};
    std::thread waiter([&] {
      lock->lock("f");
      acquired.set();
      (void)advanced.wait();
      heldAfter.store(lock->isHeld("f"));
      try {
        lock->unlock("f");
        unlocked.store(true);
      } catch (const dlock::LockError&) {
      }
    });
    REQUIRE(waitForQueue(op, "f", 1));
    pausing->failingExtends.store(1000);  // every extend of the claim is reset on the wire
    REQUIRE(op.fairUnlock("f", kA).notified == 1);
    REQUIRE(acquired.wait());  // held for the claim (the rest of a 3 s place) on the server's word
    // The watchdog renews the claim at once (its end is nearer than the next tick), on its own
    // thread: the virtual clock does not move until it has. The old watchdog waited a third of the
    // 30 s lease, so this never came.
    REQUIRE(dlock::test::eventually([&] { return lock->stats().renewals >= 1; }));
    f.clock->advance(4s);      // past the claim: only that renewal keeps the key
    const std::string holder = op.holderOf("f");
    CHECK_FALSE(holder.empty());
    CHECK(holder != kA);
    CHECK(lock->stats().lostLeases == 0);
    pausing->failingExtends.store(0);
    advanced.set();
    waiter.join();
    CHECK(heldAfter.load());
    CHECK(unlocked.load());
  }
}
