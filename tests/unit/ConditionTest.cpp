// SPDX-License-Identifier: Apache-2.0
// Condition (dlock/core/Condition.h) on the memory backend: await gives up every hold of the key
// and returns holding it again with the same count, signal needs the key, a cancel leaves the
// condition and re-acquires before InterruptedError, close() does not re-acquire; the default
// and the fair lock. Waiters run on threads; the test waits for what it means (a waiter on the
// condition, a key taken), never for a time window.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ConditionDoubles.h"
#include "Fixtures.h"
#include "Waiter.h"
#include "dlock/Cancel.h"
#include "dlock/IConditionOperator.h"
#include "dlock/LockError.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/detail/Wakeup.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::Waiter;
using Steady = std::chrono::steady_clock;

namespace {

const std::string kName = "not-empty";

struct ConditionFixture : dlock::test::VirtualFixture {
  // A fixed lease (no watchdog) and a waiter's place that the virtual clock ends only when a test
  // moves it by a minute.
  std::shared_ptr<dlock::ILock> lock(bool fair = false) const {
    return dlock::LockBuilder().backend(backend).clock(clock).leaseTime(60s).waiterLease(60s).fair(fair).build();
  }
  // Until `n` live waiters are on the condition (real time, bounded).
  [[nodiscard]] bool waiters(const std::string& key, std::size_t n) const {
    const auto give = Steady::now() + 10s;
    while (backend->inspectCondition(key, kName).waiters.size() != n) {
      if (Steady::now() > give) return false;
      std::this_thread::sleep_for(1ms);
    }
    return true;
  }
};

// Conditions whose signal messages never arrive: only the waiter's recheck (its renewal) finds a
// signal.
class DeafWaiters final : public dlock::test::ForwardingConditions {
 public:
  // `blind`: the recheck says "still waiting" too, as if every signal came after it.
  DeafWaiters(std::shared_ptr<dlock::MemoryOperator> inner, bool blind = false)
      : ForwardingConditions(std::move(inner)), blind_(blind) {}

 private:
  std::vector<dlock::ExtendResult> doRenewAwaitAll(const std::vector<dlock::ConditionWaiter>& waiters,
                                                   std::chrono::milliseconds waiterLease) override {
    std::vector<dlock::ExtendResult> renewed = ForwardingConditions::doRenewAwaitAll(waiters, waiterLease);
    if (blind_) {
      for (auto& one : renewed) one.extended = true;
    }
    return renewed;
  }

  // Hears nothing: each wait sleeps its timeout out (or until a cancel wakes it).
  class Deaf final : public dlock::IGrantWatch {
   public:
    dlock::Grant waitForGrant(std::chrono::milliseconds timeout) override {
      (void)dlock::detail::Wakeup::sleepFor(timeout);
      return {};
    }
  };
  std::unique_ptr<dlock::IGrantWatch> doWatchSignals(std::string_view /*key*/, std::string_view /*token*/) override {
    return std::make_unique<Deaf>();
  }

  const bool blind_;
};

// Conditions that count the waiters of the largest renewal batch.
class CountedRenewals final : public dlock::test::ForwardingConditions {
 public:
  using ForwardingConditions::ForwardingConditions;
  std::atomic<std::size_t> largestBatch{0};

 private:
  std::vector<dlock::ExtendResult> doRenewAwaitAll(const std::vector<dlock::ConditionWaiter>& waiters,
                                                   std::chrono::milliseconds waiterLease) override {
    if (waiters.size() > largestBatch) largestBatch = waiters.size();
    return ForwardingConditions::doRenewAwaitAll(waiters, waiterLease);
  }
};

// A lock (fixed lease) over DeafWaiters on `f`'s backend, whose watchdog renews (and so rechecks)
// its waiters' places every third of `waiterLease`: on the steady clock when `realTime`, else on
// `f`'s virtual clock (never, unless the test moves it).
std::shared_ptr<dlock::ILock> deafLock(const ConditionFixture& f, std::chrono::milliseconds waiterLease,
                                       bool blind = false, bool realTime = false) {
  return dlock::LockBuilder()
      .backend(std::make_shared<DeafWaiters>(f.backend, blind))
      .clock(realTime ? std::shared_ptr<dlock::Clock>(dlock::SteadyClock::instance()) : f.clock)
      .leaseTime(60s)
      .waiterLease(waiterLease)
      .build();
}

// A thread that takes "q" on `lock`, awaits `condition` at most `budget` and releases: acquired
// says it was signalled. A failed check leaves it to the lock's close().
std::unique_ptr<Waiter> awaiting(const std::shared_ptr<dlock::ILock>& lock, dlock::Condition& condition,
                                 std::chrono::milliseconds budget = 60s) {
  auto waiter = std::make_unique<Waiter>([lock, &condition, budget] {
    lock->lock("q");
    const bool signalled = condition.awaitFor(budget);
    lock->unlock("q");
    return signalled;
  });
  waiter->unblock = [lock] { lock->close(); };
  return waiter;
}

// Signals `condition` holding "q" on `lock`, then releases it.
void signalHolding(dlock::ILock& lock, dlock::Condition& condition) {
  REQUIRE(lock.tryLock("q"));
  condition.signal();
  lock.unlock("q");
}

}  // namespace

TEST_SUITE("Condition") {
  TEST_CASE("await gives up every hold of the key and returns holding it again with the same count") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      ConditionFixture f;
      auto lock = f.lock(fair);
      dlock::Condition notEmpty = lock->newCondition("q", kName);
      std::atomic<unsigned> countAfter{0};
      std::atomic<bool> heldAfter{false};
      Waiter waiter([&] {
        lock->lock("q");
        lock->lock("q");
        lock->lock("q");
        notEmpty.await();
        countAfter = lock->holdCount("q");
        heldAfter = lock->isHeld("q");
        for (int i = 0; i < 3; ++i) lock->unlock("q");
        return true;
      });
      waiter.unblock = [&] { lock->close(); };
      REQUIRE(f.waiters("q", 1));
      REQUIRE(lock->tryLock("q"));  // the await released the key: another thread takes it
      notEmpty.signal();
      CHECK_FALSE(waiter.returned.wait(0ms));  // it needs the key, still ours
      lock->unlock("q");
      REQUIRE(waiter.returned.wait());
      CHECK(waiter.acquired);
      CHECK(countAfter == 3);
      CHECK(heldAfter);
      CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
    }
  }

  TEST_CASE("awaitFor returns false at its budget, holding the key, and a copy of a condition is the same condition") {
    ConditionFixture f;
    auto lock = f.lock();
    const dlock::Condition made = lock->newCondition("q", kName);
    dlock::Condition copy = made;
    // The waiter and its place's watchdog sleep on the clock.
    dlock::test::onVirtualTime(*f.clock, [&] {
      lock->lock("q");
      lock->lock("q");
      const auto began = f.clock->now();
      CHECK_FALSE(copy.awaitFor(50ms));
      CHECK(f.clock->now() - began >= 50ms);
      CHECK(lock->isHeld("q"));
      CHECK(lock->holdCount("q") == 2);
      CHECK(f.backend->inspectCondition("q", kName).waiters.empty());  // left at the timeout
      CHECK_FALSE(copy.awaitUntil(Steady::now() - 1s));  // no time: checks the hold, sends nothing
      CHECK(lock->holdCount("q") == 2);
      lock->unlock("q");
      lock->unlock("q");
    }, 10ms, 2);
  }

  TEST_CASE("signal and await without holding the key are NotOwnerError, sending nothing") {
    ConditionFixture f;
    auto lock = f.lock();
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    CHECK_THROWS_AS(notEmpty.signal(), dlock::NotOwnerError);
    CHECK_THROWS_AS(notEmpty.signalAll(), dlock::NotOwnerError);
    CHECK_THROWS_AS(notEmpty.await(), dlock::NotOwnerError);
    CHECK_THROWS_AS((void)notEmpty.awaitFor(1s), dlock::NotOwnerError);
    // Held by another thread is not held by this one.
    lock->lock("q");
    std::thread other([&] {
      CHECK_THROWS_AS(notEmpty.signal(), dlock::NotOwnerError);
      CHECK_THROWS_AS(notEmpty.await(), dlock::NotOwnerError);
    });
    other.join();
    lock->unlock("q");
  }

  TEST_CASE("a signal by a holder whose lease the backend ended is NotOwnerError, and moves nobody") {
    ConditionFixture f;
    auto lock = f.lock();
    auto lateClock = std::make_shared<dlock::VirtualClock>();  // the late holder's own view of time
    auto late = dlock::LockBuilder().backend(f.backend).clock(lateClock).leaseTime(10s).build();
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    const std::unique_ptr<Waiter> waiter = awaiting(lock, notEmpty);
    REQUIRE(f.waiters("q", 1));
    REQUIRE(late->tryLock("q"));
    f.clock->advance(11s);  // the backend ends its lease; its own clock still says it holds
    REQUIRE(late->isHeld("q"));
    CHECK_THROWS_AS(late->newCondition("q", kName).signal(), dlock::NotOwnerError);
    CHECK(f.backend->inspectCondition("q", kName).waiters.size() == 1);
    CHECK_THROWS_AS(late->unlock("q"), dlock::LockLostError);
    signalHolding(*lock, notEmpty);
    REQUIRE(waiter->returned.wait());
    CHECK(waiter->acquired);
  }

  TEST_CASE("await after the lease was lost is LockLostError and joins nothing") {
    ConditionFixture f;
    auto lockClock = std::make_shared<dlock::VirtualClock>();
    auto lock = dlock::LockBuilder().backend(f.backend).clock(lockClock).leaseTime(10s).build();
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    REQUIRE(lock->tryLock("q"));
    f.clock->advance(11s);  // ended on the backend; the lock does not know yet
    CHECK_THROWS_AS(notEmpty.await(), dlock::LockLostError);
    CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
    CHECK_FALSE(lock->isHeld("q"));
    CHECK_THROWS_AS(lock->unlock("q"), dlock::LockLostError);  // the hold reports it too
    // Ended as the lock sees it: refused before anything is sent.
    REQUIRE(lock->tryLock("q"));
    lockClock->advance(11s);
    CHECK_THROWS_AS(notEmpty.await(), dlock::LockLostError);
    CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
  }

  TEST_CASE("a signal whose message is lost is found by the waiter's recheck") {
    ConditionFixture f;
    // The watchdog renews the waiter's 300 ms place every 100 ms; its budget is a minute.
    auto lock = deafLock(f, 300ms, false, true);
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    const std::unique_ptr<Waiter> waiter = awaiting(lock, notEmpty);
    REQUIRE(f.waiters("q", 1));
    signalHolding(*lock, notEmpty);
    REQUIRE(waiter->returned.wait());
    CHECK(waiter->acquired);  // signalled, not timed out
  }

  TEST_CASE("the watchdog renews the places of a lock's waiters in one call") {
    ConditionFixture f;
    auto counted = std::make_shared<CountedRenewals>(f.backend);
    auto lock = dlock::LockBuilder().backend(counted).leaseTime(60s).waiterLease(300ms).build();  // steady clock
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    std::vector<std::unique_ptr<Waiter>> waiters;
    for (int i = 0; i < 3; ++i) waiters.push_back(awaiting(lock, notEmpty));
    REQUIRE(f.waiters("q", 3));
    const auto give = Steady::now() + 10s;  // renewals come every 100 ms
    while (counted->largestBatch < 3 && Steady::now() < give) std::this_thread::sleep_for(1ms);
    CHECK(counted->largestBatch == 3);
    REQUIRE(lock->tryLock("q"));
    notEmpty.signalAll();
    lock->unlock("q");
    for (auto& waiter : waiters) {
      REQUIRE(waiter->returned.wait());
      CHECK(waiter->acquired);
    }
  }

  TEST_CASE("a cancel that comes after the signal returns holding the key: the signal is not lost") {
    ConditionFixture f;
    // The signal's message never arrives and the recheck is 20 s away: the cancel comes first.
    auto lock = deafLock(f, 60s);
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    dlock::CancelSource stop;
    std::atomic<bool> heldAfter{false};
    Waiter waiter([&] {
      lock->lock("q");
      notEmpty.await(stop.token());
      heldAfter = lock->isHeld("q");
      lock->unlock("q");
      return true;
    });
    waiter.unblock = [&] { lock->close(); };
    REQUIRE(f.waiters("q", 1));
    signalHolding(*lock, notEmpty);
    stop.requestCancel();
    REQUIRE(waiter.returned.wait());
    CHECK_FALSE(waiter.interrupted);
    CHECK(waiter.acquired);
    CHECK(heldAfter);
  }

  TEST_CASE("awaitFor signalled after its last recheck, before it left at its timeout, returns true") {
    ConditionFixture f;
    auto lock = deafLock(f, 60s, true);
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    const std::unique_ptr<Waiter> waiter = awaiting(lock, notEmpty, 2s);  // the signal comes within it
    REQUIRE(f.waiters("q", 1));
    signalHolding(*lock, notEmpty);
    REQUIRE(f.clock->awaitSleepers(2));  // the deaf waiter and its place's watchdog
    f.clock->advance(2s);                // its timeout: it leaves, and finds it was signalled
    REQUIRE(waiter->returned.wait());
    CHECK(waiter->acquired);  // the signal was its own, not lost to a timeout
  }

  TEST_CASE("a signal with nobody waiting is not remembered") {
    ConditionFixture f;
    auto lock = f.lock();
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    dlock::test::onVirtualTime(*f.clock, [&] {
      lock->lock("q");
      notEmpty.signal();
      notEmpty.signalAll();
      CHECK_FALSE(notEmpty.awaitFor(30ms));
      lock->unlock("q");
    }, 10ms, 2);
  }

  TEST_CASE("a signal skips a waiter whose lease ended and wakes the live one") {
    ConditionFixture f;
    auto lock = f.lock();
    dlock::Condition notEmpty = lock->newCondition("q", kName);
    // A waiter whose process died: joined with a 1 s place, never renewed.
    const std::string dead(32, 'd');
    const dlock::AcquireResult held = f.backend->lock("q", dead, 10s);
    REQUIRE(held.acquired);
    REQUIRE(f.backend->await("q", kName, dead, dlock::ConditionLock::Exclusive, held.fencingToken, 10s, 1s).awaiting);
    const std::unique_ptr<Waiter> waiter = awaiting(lock, notEmpty);
    REQUIRE(f.waiters("q", 2));
    f.clock->advance(2s);  // the dead waiter's place ends; the live one's (60 s) goes on
    signalHolding(*lock, notEmpty);
    REQUIRE(waiter->returned.wait());
    CHECK(waiter->acquired);
  }

  TEST_CASE("signalAll wakes every waiter, each returns holding the key in turn (on the fair lock in order)") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      ConditionFixture f;
      auto lock = f.lock(fair);
      dlock::Condition notEmpty = lock->newCondition("q", kName);
      std::mutex orderMutex;
      std::vector<int> order;
      std::atomic<int> inside{0};
      std::atomic<int> most{0};
      std::vector<std::unique_ptr<Waiter>> waiters;
      for (int i = 0; i < 3; ++i) {
        waiters.push_back(std::make_unique<Waiter>([&, i] {
          lock->lock("q");
          notEmpty.await();
          const int now = ++inside;
          most = std::max(most.load(), now);
          {
            std::lock_guard<std::mutex> guard(orderMutex);
            order.push_back(i);
          }
          --inside;
          const bool held = lock->isHeld("q");
          lock->unlock("q");
          return held;
        }));
        waiters.back()->unblock = [&] { lock->close(); };
        REQUIRE(f.waiters("q", static_cast<std::size_t>(i) + 1));  // in this order
      }
      lock->lock("q");
      notEmpty.signalAll();
      CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
      lock->unlock("q");
      for (auto& waiter : waiters) {
        REQUIRE(waiter->returned.wait());
        CHECK(waiter->acquired);
      }
      CHECK(most == 1);
      REQUIRE(order.size() == 3);
      if (fair) CHECK(order == std::vector<int>{0, 1, 2});
    }
  }

  TEST_CASE("a cancel during await leaves the condition, re-acquires the key, then throws InterruptedError") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      ConditionFixture f;
      auto lock = f.lock(fair);
      dlock::Condition notEmpty = lock->newCondition("q", kName);
      dlock::CancelSource stop;
      std::atomic<bool> heldAfter{false};
      std::atomic<unsigned> countAfter{0};
      Waiter waiter([&] {
        lock->lock("q");
        lock->lock("q");
        try {
          notEmpty.await(stop.token());
        } catch (const dlock::InterruptedError&) {
          heldAfter = lock->isHeld("q");
          countAfter = lock->holdCount("q");
          lock->unlock("q");
          lock->unlock("q");
          throw;
        }
        return true;
      });
      waiter.unblock = [&] { lock->close(); };
      REQUIRE(f.waiters("q", 1));
      REQUIRE(lock->tryLock("q"));  // the waiter re-acquires only once this is released
      stop.requestCancel();
      REQUIRE(f.waiters("q", 0));  // left at once, before it has the key
      CHECK_FALSE(waiter.returned.wait(0ms));
      lock->unlock("q");
      REQUIRE(waiter.returned.wait());
      CHECK(waiter.interrupted);
      CHECK(heldAfter);
      CHECK(countAfter == 2);
      // A token cancelled before the call: InterruptedError at once, still holding, nothing joined.
      lock->lock("q");
      CHECK_THROWS_AS(notEmpty.await(stop.token()), dlock::InterruptedError);
      CHECK(lock->isHeld("q"));
      CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
      lock->unlock("q");
    }
  }

  TEST_CASE("close() during await is InterruptedError without the key, and the waiter's unlock ends it silently") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      ConditionFixture f;
      auto lock = f.lock(fair);
      dlock::Condition notEmpty = lock->newCondition("q", kName);
      std::atomic<bool> heldAfter{true};
      Waiter waiter([&] {
        lock->lock("q");
        try {
          notEmpty.await();
        } catch (const dlock::InterruptedError&) {
          heldAfter = lock->isHeld("q");
          CHECK_NOTHROW(lock->unlock("q"));  // the await gave the key up: nothing was held since
          CHECK(lock->holdCount("q") == 0);
          throw;
        }
        return true;
      });
      REQUIRE(f.waiters("q", 1));
      lock->close();
      REQUIRE(waiter.returned.wait());
      CHECK(waiter.interrupted);
      CHECK_FALSE(heldAfter);
      CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
      auto other = f.lock(fair);
      CHECK(other->tryLock("q"));  // nobody holds it
      other->unlock("q");
      CHECK_THROWS_AS(notEmpty.signal(), dlock::NotOwnerError);
    }
  }

  TEST_CASE("newCondition: ConfigError on Redlock and on a read-write lock, InvalidArgumentError for a bad name") {
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (int i = 0; i < 3; ++i) members.push_back(std::make_shared<dlock::MemoryOperator>());
    auto redlock = dlock::LockBuilder().backend(std::make_shared<dlock::RedlockOperator>(members)).build();
    CHECK_THROWS_WITH_AS((void)redlock->newCondition("q", kName), doctest::Contains("keeps no conditions"),
                         dlock::ConfigError);
    ConditionFixture f;
    auto rw = dlock::LockBuilder().backend(f.backend).clock(f.clock).buildReadWrite();
    CHECK_THROWS_AS((void)rw->writeLock()->newCondition("q", kName), dlock::ConfigError);
    CHECK_THROWS_AS((void)rw->readLock()->newCondition("q", kName), dlock::ConfigError);
    auto lock = f.lock();
    CHECK_THROWS_AS((void)lock->newCondition("q", ""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->newCondition("q", std::string(dlock::kMaxConditionNameBytes + 1, 'n')),
                    dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)lock->newCondition("", kName), dlock::InvalidArgumentError);
    CHECK_NOTHROW((void)lock->newCondition("q", std::string(dlock::kMaxConditionNameBytes, 'n')));
  }
}
