// SPDX-License-Identifier: Apache-2.0
// Cancellation, close() and destruction on the memory backend: a cancelled wait throws
// InterruptedError holding nothing and leaving nothing queued; close() ends every wait and
// releases the thread holds; extend and remainingLease of a fixed lease.
#include <doctest/doctest.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "LogCapture.h"
#include "ThreadState.h"
#include "Waiter.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::Event;
using dlock::test::VirtualFixture;
using dlock::test::Waiter;

namespace {

// Counts acquire calls; `onLock` runs before each (a cancel racing the try).
class CountingOperator final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    ++locks;
    if (onLock) onLock();
    return inner_->lock(key, token, ttl);
  }
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }
  std::atomic<int> locks{0};
  std::function<void()> onLock;
};

struct CancelFixture : VirtualFixture {
  // A recheck far longer than any test: a waiter that is not woken by the cancel stays asleep.
  std::shared_ptr<dlock::ILock> waiting(bool fair = false) const {
    return dlock::LockBuilder()
        .backend(backend)
        .clock(clock)
        .leaseTime(60s)
        .waitStrategy(std::make_shared<dlock::NotifyWait>(60s))
        .fair(fair)
        .build();
  }
};

// Until `lock` has made `tries` acquire calls (the waiter found the key taken and is pausing).
bool triedAtLeast(const dlock::ILock& lock, std::uint64_t tries) {
  const auto give = std::chrono::steady_clock::now() + 10s;
  while (lock.stats().attempts < tries) {
    if (std::chrono::steady_clock::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

// NotifyWait(60 s) that says when a wait has begun pausing (its try found the key taken).
struct PausingNotify final : dlock::IWait {
  dlock::NotifyWait inner{60s};
  std::atomic<int> pauses{0};
  [[nodiscard]] bool wantsReleaseWatch() const noexcept override { return inner.wantsReleaseWatch(); }
  void wait(const dlock::WaitContext& ctx) override {
    pauses.fetch_add(1);
    inner.wait(ctx);
  }
  [[nodiscard]] bool paused() const {
    const auto give = std::chrono::steady_clock::now() + 10s;
    while (pauses.load() == 0) {
      if (std::chrono::steady_clock::now() > give) return false;
      std::this_thread::yield();
    }
    return true;
  }
};

}  // namespace

TEST_SUITE("Cancellation") {
  TEST_CASE("a callback on a cancelled token runs at once, one registered before runs once on the cancel") {
    dlock::CancelSource source;
    int before = 0;
    {
      dlock::CancelCallback early(source.token(), [&] { ++before; });
      CHECK(source.requestCancel());
      CHECK_FALSE(source.requestCancel());
    }
    CHECK(before == 1);
    int after = 0;
    dlock::CancelCallback late(source.token(), [&] { ++after; });
    CHECK(after == 1);
    CHECK(source.token().cancelRequested());
    CHECK_FALSE(dlock::CancelToken().cancelRequested());
    CHECK_FALSE(dlock::CancelToken().cancellable());
  }

  TEST_CASE("a callback's destructor waits for the callback running on another thread") {
    dlock::CancelSource source;
    Event running;
    Event release;
    std::atomic<bool> finished{false};
    auto callback = std::make_unique<dlock::CancelCallback>(source.token(), [&] {
      running.set();
      (void)release.wait();
      finished = true;
    });
    std::thread canceller([&] { source.requestCancel(); });
    REQUIRE(running.wait());
    const pid_t self = static_cast<pid_t>(::syscall(SYS_gettid));
    std::thread releaser([&] {
      // Once this thread is blocked in the destructor below, waiting for the running callback.
      while (!dlock::test::threadSleeping(self)) std::this_thread::yield();
      release.set();
    });
    callback.reset();
    CHECK(finished);  // not destroyed while it ran
    canceller.join();
    releaser.join();
  }

  TEST_CASE("a token cancelled already throws InterruptedError before anything is sent") {
    CancelFixture f;
    auto counting = std::make_shared<CountingOperator>(f.backend);
    auto lock = dlock::LockBuilder().backend(counting).clock(f.clock).leaseTime(60s).build();
    dlock::CancelSource stop;
    stop.requestCancel();
    CHECK_THROWS_AS(lock->lock("k", stop.token()), dlock::InterruptedError);
    CHECK_THROWS_AS((void)lock->tryLock("k", 1s, stop.token()), dlock::InterruptedError);
    dlock::AcquireOptions options;
    options.cancel = stop.token();
    CHECK_THROWS_AS((void)lock->acquire("k", options), dlock::InterruptedError);
    CHECK(counting->locks == 0);
    CHECK_FALSE(lock->isHeld("k"));
  }

  TEST_CASE("a cancel ends a wait at once, holding nothing") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      CancelFixture f;
      auto holder = f.waiting(fair);
      auto lock = f.waiting(fair);
      REQUIRE(holder->tryLock("k"));
      dlock::CancelSource stop;
      Waiter waiter([&] {
        lock->lock("k", stop.token());
        return true;
      });
      REQUIRE(triedAtLeast(*lock, 2));  // found it taken, and listened, tried again
      if (fair) REQUIRE(f.backend->queued("k") == 1);
      stop.requestCancel();
      REQUIRE(waiter.returned.wait(5s));  // the 60 s recheck would be far later
      CHECK(waiter.interrupted);
      CHECK(f.backend->queued("k") == 0);  // left the queue
      holder->unlock("k");
      CHECK(f.backend->inspect("k").held == false);  // handed to nobody
      CHECK(lock->tryLock("k"));
      lock->unlock("k");
    }
  }

  TEST_CASE("a cancel ends a wait on Redlock at once (every member's watch is woken)") {
    CancelFixture f;
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (int i = 0; i < 3; ++i) members.push_back(std::make_shared<dlock::MemoryOperator>(f.clock));
    auto redlock = std::make_shared<dlock::RedlockOperator>(members);
    auto pausing = std::make_shared<PausingNotify>();
    const auto build = [&](std::shared_ptr<dlock::IWait> wait) {
      return dlock::LockBuilder().backend(redlock).clock(f.clock).leaseTime(60s).waitStrategy(std::move(wait)).build();
    };
    auto holder = build(std::make_shared<dlock::NotifyWait>(60s));
    auto lock = build(pausing);
    REQUIRE(holder->tryLock("k"));
    dlock::CancelSource stop;
    Waiter waiter([&] {
      lock->lock("k", stop.token());
      return true;
    });
    REQUIRE(pausing->paused());  // asleep on the members' watches (or about to be)
    stop.requestCancel();
    REQUIRE(waiter.returned.wait(5s));
    CHECK(waiter.interrupted);
    holder->unlock("k");
  }

  TEST_CASE("a cancel ends a tryLock with a timeout, and waits in the process queue") {
    CancelFixture f;
    auto holder = f.waiting();
    auto lock = f.waiting();
    REQUIRE(holder->tryLock("k"));
    dlock::CancelSource stop;
    Waiter first([&] { return lock->tryLock("k", 60s, stop.token()); });
    REQUIRE(triedAtLeast(*lock, 1));
    dlock::CancelSource other;
    Waiter second([&] { return lock->tryLock("k", 60s, other.token()); });  // behind `first` in the process
    REQUIRE(triedAtLeast(*lock, 3));
    other.requestCancel();
    REQUIRE(second.returned.wait(5s));
    CHECK(second.interrupted);
    stop.requestCancel();
    REQUIRE(first.returned.wait(5s));
    CHECK(first.interrupted);
    holder->unlock("k");
  }

  TEST_CASE("a cancel ends an outage's back-off, the first try's included") {
    CancelFixture f;
    auto lock = f.waiting();
    f.backend->failNextCalls(1000000);  // unreachable: the wait rides it out
    dlock::CancelSource stop;
    Waiter waiter([&] {
      lock->lock("k", stop.token());
      return true;
    });
    REQUIRE(triedAtLeast(*lock, 1));
    stop.requestCancel();
    REQUIRE(waiter.returned.wait(5s));  // well before the 30 s outage tolerance
    CHECK(waiter.interrupted);
  }

  TEST_CASE("a key a try took as the wait was cancelled is given back") {
    CancelFixture f;
    auto racing = std::make_shared<CountingOperator>(f.backend);
    auto lock = dlock::LockBuilder().backend(racing).clock(f.clock).leaseTime(60s).build();
    dlock::CancelSource stop;
    racing->onLock = [&] { stop.requestCancel(); };  // cancelled while the (winning) try is in flight
    CHECK_THROWS_AS(lock->lock("k", stop.token()), dlock::InterruptedError);
    CHECK(racing->locks == 1);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK_FALSE(f.backend->inspect("k").held);  // released by its token, not left for its lease
  }

  TEST_CASE("close() ends every wait, refuses new ones and releases every thread's holds") {
    CancelFixture f;
    dlock::test::LogCapture log;
    auto other = f.waiting();
    auto lock = f.waiting();
    auto fairLock = f.waiting(true);
    REQUIRE(other->tryLock("busy"));
    REQUIRE(lock->tryLock("mine"));
    Event heldThere;
    Event closedHere;
    std::atomic<bool> lostAfterClose{false};
    std::thread holder([&] {
      CHECK(lock->tryLock("theirs"));
      heldThere.set();
      (void)closedHere.wait();
      try {
        lock->unlock("theirs");
      } catch (const dlock::LockLostError&) {
        lostAfterClose = true;
      }
    });
    REQUIRE(heldThere.wait());
    std::vector<std::unique_ptr<Waiter>> waiters;
    for (int i = 0; i < 4; ++i) waiters.push_back(std::make_unique<Waiter>([&] { return lock->tryLock("busy", 60s); }));
    REQUIRE(triedAtLeast(*lock, 2 + 4));
    lock->close();
    for (auto& waiter : waiters) {
      REQUIRE(waiter->returned.wait(5s));
      CHECK(waiter->interrupted);
    }
    CHECK_FALSE(f.backend->inspect("mine").held);
    CHECK_FALSE(f.backend->inspect("theirs").held);
    CHECK(f.backend->inspect("busy").held);  // another lock's
    CHECK_THROWS_AS(lock->lock("free"), dlock::InterruptedError);
    CHECK_THROWS_AS((void)lock->tryLock("mine"), dlock::InterruptedError);  // its hold was released
    CHECK_FALSE(f.backend->inspect("free").held);
    CHECK_THROWS_AS(lock->unlock("mine"), dlock::LockLostError);
    closedHere.set();
    holder.join();
    CHECK(lostAfterClose);
    CHECK(log.text().find("released 'mine'") != std::string::npos);
    CHECK(log.text().find("released 'theirs'") != std::string::npos);
    CHECK(log.text().find("ended holding") == std::string::npos);
    fairLock->close();  // idempotent, and harmless with nothing held
    fairLock->close();
  }

  TEST_CASE("a lock destroyed while holding keys frees them at once, its leases stay their holders'") {
    CancelFixture f;
    dlock::test::LogCapture log;
    auto lock = f.waiting();
    for (const char* key : {"a", "b", "c"}) REQUIRE(lock->tryLock(key));
    dlock::Lease lease = lock->acquire("lease");
    REQUIRE(lease);
    lock.reset();
    for (const char* key : {"a", "b", "c"}) CHECK_FALSE(f.backend->inspect(key).held);
    CHECK(lease.isHeld());
    CHECK(f.backend->inspect("lease").held);
    lease.release();
    CHECK(log.text().find("released 'a'") != std::string::npos);
    CHECK(log.text().find("ended holding") == std::string::npos);
  }

  TEST_CASE("a thread that ends after close() released its hold is not said to have ended holding it") {
    CancelFixture f;
    dlock::test::LogCapture log;
    auto lock = f.waiting();
    Event held;
    Event closed;
    std::thread holder([&] {
      CHECK(lock->tryLock("k"));
      held.set();
      (void)closed.wait();  // ends without unlocking: close() released it
    });
    REQUIRE(held.wait());
    lock->close();
    closed.set();
    holder.join();
    CHECK_FALSE(f.backend->inspect("k").held);
    CHECK(log.text().find("released 'k' on memory:// at close") != std::string::npos);
    CHECK(log.text().find("ended holding") == std::string::npos);
  }

  TEST_CASE("a thread exiting with a hold is still reported as such") {
    CancelFixture f;
    dlock::test::LogCapture log;
    auto lock = f.waiting();
    std::thread([&] { CHECK(lock->tryLock("k")); }).join();
    CHECK(log.text().find("a thread ended holding 'k'") != std::string::npos);
  }

  TEST_CASE("extend moves a fixed lease's end, remainingLease reads it locally") {
    CancelFixture f;
    auto lock = f.leased(10s);
    CHECK(lock->remainingLease("k") == 0ms);
    CHECK_THROWS_AS(lock->extend("k", 5s), dlock::NotOwnerError);
    REQUIRE(lock->tryLock("k"));
    CHECK(lock->remainingLease("k") == 10s);
    f.clock->advance(4s);
    CHECK(lock->remainingLease("k") == 6s);
    lock->extend("k", 20s);
    CHECK(lock->remainingLease("k") == 20s);
    f.clock->advance(15s);  // past the first lease's end: held by the extend
    CHECK(lock->isHeld("k"));
    CHECK(f.backend->inspect("k").held);
    CHECK_THROWS_AS(lock->extend("k", 0ms), dlock::InvalidArgumentError);
    f.clock->advance(6s);
    CHECK(lock->remainingLease("k") == 0ms);
    CHECK_THROWS_AS(lock->extend("k", 5s), dlock::LockLostError);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);

    auto watched = f.watched(30s);
    REQUIRE(watched->tryLock("w"));
    CHECK_THROWS_AS(watched->extend("w", 5s), dlock::InvalidArgumentError);
    watched->unlock("w");
  }

  TEST_CASE("Lease::extend and Lease::remainingLease") {
    CancelFixture f;
    auto lock = f.leased(10s);
    dlock::Lease lease = lock->acquire("k");
    REQUIRE(lease);
    f.clock->advance(9s);
    CHECK(lease.remainingLease() == 1s);
    lease.extend(10s);
    CHECK(lease.remainingLease() == 10s);
    f.clock->advance(5s);
    CHECK(lease.isHeld());
    lease.release();
    CHECK(lease.remainingLease() == 0ms);
    CHECK_THROWS_AS(lease.extend(1s), dlock::NotOwnerError);
  }
}
