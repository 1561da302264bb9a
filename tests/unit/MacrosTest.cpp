// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "Fixtures.h"
#include "LogCapture.h"
#include "dlock/macros.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

namespace {

// Installs a default lock for one test and removes it afterwards.
struct DefaultLockScope {
  explicit DefaultLockScope(std::shared_ptr<dlock::ILock> lock) { dlock::setDefaultLock(std::move(lock)); }
  DefaultLockScope(const DefaultLockScope&) = delete;
  DefaultLockScope& operator=(const DefaultLockScope&) = delete;
  ~DefaultLockScope() { dlock::resetDefaultLock(); }
};

}  // namespace

TEST_SUITE("Macros") {
  TEST_CASE("DISTRIBUTED_LOCK holds the key for the scope") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    int evaluations = 0;
    const auto key = [&] {
      ++evaluations;
      return std::string("order:") + "42";
    };
    {
      DISTRIBUTED_LOCK(key());
      CHECK(lock->isHeld("order:42"));
      DISTRIBUTED_LOCK("second");  // two guards in one scope get distinct names
      CHECK(lock->isHeld("second"));
    }
    CHECK(evaluations == 1);
    CHECK_FALSE(lock->isHeld("order:42"));
    CHECK(f.backend->size() == 0);
  }

  TEST_CASE("DISTRIBUTED_LOCK releases when the scope exits by an exception") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    CHECK_THROWS_AS(
        [&] {
          DISTRIBUTED_LOCK("k");
          throw std::runtime_error("business failure");
        }(),
        std::runtime_error);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("DISTRIBUTED_LOCK_WITH works on an injected lock, by pointer or reference") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    {
      DISTRIBUTED_LOCK_WITH(lock, "a");
      DISTRIBUTED_LOCK_WITH(*lock, "b");
      CHECK(lock->isHeld("a"));
      CHECK(lock->isHeld("b"));
    }
    CHECK(f.backend->size() == 0);
  }

  TEST_CASE("DISTRIBUTED_TRY_LOCK runs the block only when the key was had") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    int ran = 0;
    int refused = 0;
    DISTRIBUTED_TRY_LOCK("k", 10ms) {
      ++ran;
      CHECK(lock->isHeld("k"));
    } else {
      ++refused;
    }
    CHECK(ran == 1);
    CHECK_FALSE(lock->isHeld("k"));

    auto holder = f.leased(30s);  // another lock object holds it now
    REQUIRE(holder->tryLock("k"));
    dlock::test::onVirtualTime(*f.clock, [&] {  // the 20 ms wait runs out on the virtual clock
      DISTRIBUTED_TRY_LOCK("k", 20ms) { ++ran; }
      else {
        ++refused;
      }
    }, 5ms);
    CHECK(ran == 1);
    CHECK(refused == 1);
    holder->unlock("k");

    DISTRIBUTED_TRY_LOCK_WITH(holder, "k", 10ms) { ++ran; }
    CHECK(ran == 2);
  }

  TEST_CASE("DISTRIBUTED_TRY_LOCK releases when its block throws") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    CHECK_THROWS_AS(
        [&] {
          DISTRIBUTED_TRY_LOCK("k", 10ms) { throw std::runtime_error("inside"); }
        }(),
        std::runtime_error);
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("DISTRIBUTED_TRY_LOCK with a timeout of zero or less tries once") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    int ran = 0;
    auto calls = f.backend->calls();
    DISTRIBUTED_TRY_LOCK("k", 0ms) { ++ran; }
    DISTRIBUTED_TRY_LOCK("k", -1ms) { ++ran; }
    CHECK(ran == 2);
    CHECK(f.backend->calls() == calls + 4);  // one try and one release each
    auto holder = f.leased(30s);
    REQUIRE(holder->tryLock("k"));
    calls = f.backend->calls();
    DISTRIBUTED_TRY_LOCK_WITH(lock, "k", 0ms) { ++ran; }
    CHECK(ran == 2);
    CHECK(f.backend->calls() == calls + 1);
    const dlock::ScopedLock refused(lock, "k", -5ms);
    CHECK_FALSE(refused.owns());
    holder->unlock("k");
  }

  TEST_CASE("DISTRIBUTED_LOCK_NAMED's guard unlock reports a lost lease, and the scope end then does nothing") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    dlock::test::LogCapture log;
    std::uint64_t calls = 0;
    {
      DISTRIBUTED_LOCK_NAMED(guard, "k");
      CHECK(guard.owns());
      CHECK(guard.fencingToken() == 1);
      f.clock->advance(30s);  // the section outlived its lease
      CHECK_THROWS_AS(guard.unlock(), dlock::LockLostError);
      CHECK_FALSE(guard.owns());
      CHECK_THROWS_AS(guard.unlock(), dlock::NotOwnerError);
      calls = f.backend->calls();
    }
    CHECK(f.backend->calls() == calls);
    CHECK(log.text().find("not held by this thread") == std::string::npos);
  }

  TEST_CASE("a named guard's unlock releases at once") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    {
      DISTRIBUTED_LOCK_NAMED(guard, "k");
      guard.unlock();
      CHECK(f.backend->holderOf("k").empty());
      CHECK_FALSE(lock->isHeld("k"));
      REQUIRE(lock->tryLock("k"));  // held again, by a hold the guard knows nothing of
    }
    CHECK(lock->isHeld("k"));  // the scope end released nothing
    lock->unlock("k");
  }

  TEST_CASE("DISTRIBUTED_TRY_LOCK_NAMED's guard unlock reports a lost lease too") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    DefaultLockScope scope(lock);
    bool reported = false;
    DISTRIBUTED_TRY_LOCK_NAMED(guard, "k", 10ms) {
      f.clock->advance(31s);
      try {
        guard.unlock();
      } catch (const dlock::LockLostError&) {
        reported = true;
      }
    }
    CHECK(reported);
    CHECK(lock->holdCount("k") == 0);
  }

  TEST_CASE("ScopedLock::unlock keeps the hold after a ConnectionError, for a retry or the destructor") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    {
      dlock::ScopedLock guard(lock, "k");
      f.backend->failNextCalls(1);
      CHECK_THROWS_AS(guard.unlock(), dlock::ConnectionError);
      CHECK(guard.owns());
      CHECK(lock->holdCount("k") == 1);
    }  // the destructor releases it
    CHECK(f.backend->holderOf("k").empty());
    CHECK(lock->holdCount("k") == 0);
  }

  TEST_CASE("a macro used with no default lock set throws ConfigError") {
    dlock::resetDefaultLock();
    try {
      DISTRIBUTED_LOCK("k");
      FAIL("DISTRIBUTED_LOCK without a default lock must throw");
    } catch (const dlock::ConfigError& error) {
      CHECK(std::string(error.what()).find("setDefaultLock") != std::string::npos);
    }
    CHECK_THROWS_AS([] { DISTRIBUTED_TRY_LOCK("k", 10ms) {} }(), dlock::ConfigError);
  }

  TEST_CASE("the default lock is set once") {
    VirtualFixture f;
    DefaultLockScope scope(f.leased(30s));
    CHECK_THROWS_AS(dlock::setDefaultLock(f.leased(30s)), dlock::ConfigError);
    CHECK_THROWS_AS(dlock::setDefaultLock(nullptr), dlock::ConfigError);
  }
}
