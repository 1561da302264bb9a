#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "Fixtures.h"
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
    DISTRIBUTED_TRY_LOCK("k", 20ms) { ++ran; }
    else {
      ++refused;
    }
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
