// SPDX-License-Identifier: Apache-2.0
// Shutdown on the memory backend (docs/reference.md, "Shutdown"): cancel the waits, join their
// threads, then close the lock and the semaphore. Workers wait on a Condition, on a semaphore and
// on a lock; the `dlock` logger's output is captured (LogCapture) to show that nothing held is
// warned about, whichever of the cancel and the close a waiter meets first.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "ConditionDoubles.h"
#include "Fixtures.h"
#include "LogCapture.h"
#include "Waiter.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/MutexHandle.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::Event;
using dlock::test::Waiter;

namespace {

const std::string kName = "ready";

// A memory backend whose leaving of a condition waits for the test: a cancelled awaiter is held
// there, after it gave the key up and before it can take it again.
class HeldLeave final : public dlock::test::ForwardingConditions {
 public:
  using ForwardingConditions::ForwardingConditions;
  Event leaving;
  Event proceed;

 private:
  bool doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                        std::chrono::milliseconds ttl) override {
    leaving.set();
    (void)proceed.wait();
    return ForwardingConditions::doLeaveCondition(key, name, token, ttl);
  }
};

// Until `n` live waiters are on `key`'s condition (real time, bounded).
[[nodiscard]] bool waitersOn(dlock::MemoryOperator& backend, const std::string& key, std::size_t n) {
  const auto give = std::chrono::steady_clock::now() + 10s;
  while (backend.inspectCondition(key, kName).waiters.size() != n) {
    if (std::chrono::steady_clock::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

// Takes `key` under a guard (as a service does) and awaits `condition` until `cancel`.
bool awaitUnderGuard(dlock::ILock& lock, const std::string& key, dlock::Condition& condition,
                     const dlock::CancelToken& cancel) {
  dlock::MutexHandle mutex = lock.mutex(key);
  std::unique_lock<dlock::MutexHandle> guard(mutex);
  while (true) condition.await(cancel);  // nobody signals: only the cancel ends it
}

}  // namespace

TEST_SUITE("Shutdown") {
  TEST_CASE("requestCancel then close before a cancelled awaiter retook the key logs no unprotected section") {
    dlock::test::VirtualFixture f;
    auto backend = std::make_shared<HeldLeave>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).leaseTime(60s).waiterLease(60s).build();
    dlock::Condition ready = lock->newCondition("q", kName);
    dlock::CancelSource stop;
    dlock::test::LogCapture log(spdlog::level::warn);
    Waiter waiter([&] { return awaitUnderGuard(*lock, "q", ready, stop.token()); });
    waiter.unblock = [&] { backend->proceed.set(); };
    REQUIRE(waitersOn(*f.backend, "q", 1));
    stop.requestCancel();
    REQUIRE(backend->leaving.wait());  // the awaiter gave the key up and has not taken it again
    lock->close();
    backend->proceed.set();
    REQUIRE(waiter.returned.wait());
    CHECK(waiter.interrupted);
    const std::string logged = log.text();
    CHECK_MESSAGE(logged.find("not protected") == std::string::npos, logged);
    CHECK_MESSAGE(logged.find("not held") == std::string::npos, logged);
    CHECK(f.backend->holderOf("q").empty());
  }

  TEST_CASE("close() ending the retake of a cancelled awaiter leaves a hold that its guard ends silently") {
    dlock::test::VirtualFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(60s).waiterLease(60s).build();
    dlock::Condition ready = lock->newCondition("q", kName);
    dlock::CancelSource stop;
    dlock::test::LogCapture log(spdlog::level::warn);
    std::atomic<bool> heldAfter{true};
    Waiter waiter([&] {
      dlock::MutexHandle mutex = lock->mutex("q");
      std::unique_lock<dlock::MutexHandle> guard(mutex);
      try {
        while (true) ready.await(stop.token());
      } catch (const dlock::InterruptedError&) {
        heldAfter = lock->isHeld("q");
        throw;
      }
      return true;
    });
    waiter.unblock = [&] { lock->close(); };
    REQUIRE(waitersOn(*f.backend, "q", 1));
    // Another owner takes the key the await gave up: the awaiter's retake must wait for it.
    REQUIRE(f.backend->lock("q", "another-owner", 1h).acquired);
    stop.requestCancel();
    REQUIRE(waitersOn(*f.backend, "q", 0));  // left the condition; from here on only the retake sleeps
    REQUIRE(f.clock->awaitSleepers(2));      // the retake and the condition place's watchdog
    lock->close();
    REQUIRE(waiter.returned.wait());
    CHECK(waiter.interrupted);
    CHECK_FALSE(heldAfter);
    const std::string logged = log.text();
    CHECK_MESSAGE(logged.find("not protected") == std::string::npos, logged);
    CHECK_MESSAGE(logged.find("not held") == std::string::npos, logged);
    CHECK(f.backend->holderOf("q") == "another-owner");
  }

  TEST_CASE("cancel, join, close: waiters on a Condition, a semaphore and a lock end with nothing held or warned") {
    dlock::test::VirtualFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).clock(f.clock).leaseTime(60s).waiterLease(60s).build();
    auto semaphore =
        dlock::SemaphoreBuilder().backend(f.backend).clock(f.clock).name("s").permits(1).leaseTime(60s).build();
    dlock::Condition ready = lock->newCondition("q", kName);
    REQUIRE(f.backend->lock("k", "another-owner", 1h).acquired);
    const dlock::PermitLease taken = semaphore->tryAcquire(1);
    REQUIRE(taken);
    dlock::CancelSource stop;
    dlock::test::LogCapture log(spdlog::level::warn);
    Waiter onCondition([&] { return awaitUnderGuard(*lock, "q", ready, stop.token()); });
    Waiter onSemaphore([&] {
      dlock::AcquireOptions options;
      options.cancel = stop.token();
      return static_cast<bool>(semaphore->acquire(1, options));
    });
    Waiter onLock([&] {
      lock->lock("k", stop.token());
      lock->unlock("k");
      return true;
    });
    for (Waiter* waiter : {&onCondition, &onSemaphore, &onLock}) {
      waiter->unblock = [&] {
        lock->close();
        semaphore->close();
      };
    }
    REQUIRE(waitersOn(*f.backend, "q", 1));
    // The three waits and the condition place's watchdog sleep on the clock.
    REQUIRE(f.clock->awaitSleepers(4));
    stop.requestCancel();  // 1. cancel
    for (Waiter* waiter : {&onCondition, &onSemaphore, &onLock}) {
      REQUIRE(waiter->returned.wait());  // 2. join
      CHECK(waiter->interrupted);
    }
    lock->close();  // 3. close
    semaphore->close();
    const std::string logged = log.text();
    CHECK_MESSAGE(logged.empty(), logged);
    CHECK(f.backend->holderOf("q").empty());
    CHECK(f.backend->holderOf("k") == "another-owner");
    CHECK(f.backend->inspectCondition("q", kName).waiters.empty());
    CHECK(f.backend->inspectSemaphore("s").waiters.empty());
  }
}
