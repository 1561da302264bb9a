// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "LogCapture.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

TEST_SUITE("MutexHandle") {
  TEST_CASE("std::lock_guard holds the key for its scope") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto mutex = lock->mutex("k");
    {
      std::lock_guard<dlock::MutexHandle> guard(mutex);
      CHECK(lock->isHeld("k"));
    }
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("std::unique_lock with try_to_lock, try_lock_for and try_lock_until") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto mutex = lock->mutex("k");
    std::atomic<int> owned{0};
    std::unique_lock<dlock::MutexHandle> held(mutex);
    dlock::test::onVirtualTime(*f.clock, [&] {  // another thread; its 20 ms run out on the virtual clock
      std::unique_lock<dlock::MutexHandle> tried(mutex, std::try_to_lock);
      if (tried.owns_lock()) ++owned;
      std::unique_lock<dlock::MutexHandle> timed(mutex, std::defer_lock);
      if (timed.try_lock_for(20ms)) ++owned;
    }, 5ms);
    CHECK(owned == 0);  // held by this thread throughout
    held.unlock();

    std::unique_lock<dlock::MutexHandle> forGuard(mutex, 50ms);
    CHECK(forGuard.owns_lock());
    forGuard.unlock();
    std::unique_lock<dlock::MutexHandle> untilGuard(mutex, std::chrono::steady_clock::now() + 50ms);
    CHECK(untilGuard.owns_lock());
    untilGuard.unlock();
    std::unique_lock<dlock::MutexHandle> systemGuard(mutex, std::chrono::system_clock::now() + 50ms);
    CHECK(systemGuard.owns_lock());
  }

  TEST_CASE("try_lock_for with a non-positive wait tries once, as the standard says") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto mutex = lock->mutex("k");
    CHECK(mutex.try_lock_for(0ms));
    mutex.unlock();
    CHECK(mutex.try_lock_for(-1s));
    mutex.unlock();
    CHECK(mutex.try_lock_until(std::chrono::steady_clock::now() - 1s));
    mutex.unlock();
  }

  TEST_CASE("std::scoped_lock over two keys in opposite orders never deadlocks") {
    VirtualFixture f;
    auto lock = dlock::LockBuilder().backend(f.backend).leaseTime(30s).build();  // real clock: real waits
    auto a = lock->mutex("a");
    auto b = lock->mutex("b");
    long counter = 0;
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          if (t == 0) {
            std::scoped_lock both(a, b);
            ++counter;
          } else {
            std::scoped_lock both(b, a);
            ++counter;
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();  // a deadlock would hang here: ctest's timeout fails it
    CHECK(counter == 400);
    CHECK(f.backend->size() == 0);
  }

  TEST_CASE("unlockOrThrow reports a lost lease as LockLostError, where unlock only logs") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto mutex = lock->mutex("k");
    {
      std::unique_lock<dlock::MutexHandle> guard(mutex);
      f.clock->advance(30s);  // the section outlived its lease
      CHECK_THROWS_AS(guard.release()->unlockOrThrow(), dlock::LockLostError);
    }
    CHECK(lock->holdCount("k") == 0);
    CHECK_THROWS_AS(mutex.unlockOrThrow(), dlock::NotOwnerError);
    mutex.lock();
    mutex.unlockOrThrow();  // a lease that held to the end: released, no error
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("unlock never throws: a failed release is logged and the hold forgotten") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    auto mutex = lock->mutex("k");
    dlock::test::LogCapture log;
    mutex.lock();
    f.backend->failNextCalls(1);
    mutex.unlock();  // noexcept
    CHECK(lock->holdCount("k") == 0);
    CHECK(log.text().find("releasing 'k' failed") != std::string::npos);
    static_assert(noexcept(mutex.unlock()));
  }
}
