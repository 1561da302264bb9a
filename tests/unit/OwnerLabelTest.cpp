// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>

#include "Fixtures.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

using namespace std::chrono_literals;

namespace {

std::string expectedLabel(const std::string& text) {
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  return std::string("host=") + host + " pid=" + std::to_string(::getpid()) + (text.empty() ? "" : " " + text);
}

}  // namespace

TEST_SUITE("OwnerLabel") {
  TEST_CASE("a lock built with ownerLabel records host, pid and text, and inspect shows it with when it was taken") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    auto lock = dlock::LockBuilder().backend(backend).clock(clock).ownerLabel("job=nightly").build();
    const auto before = std::chrono::system_clock::now();
    REQUIRE(lock->tryLock("k"));
    const dlock::LeaseInfo info = backend->inspect("k");
    CHECK(info.held);
    CHECK(info.owner == expectedLabel("job=nightly"));
    CHECK(info.ownerSince >= std::chrono::time_point_cast<std::chrono::milliseconds>(before));
    CHECK(info.ownerSince <= std::chrono::system_clock::now());
    lock->unlock("k");
    CHECK(backend->inspect("k").owner.empty());
  }

  TEST_CASE("a lock built without ownerLabel records none") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = dlock::LockBuilder().backend(backend).build();
    REQUIRE(lock->tryLock("k"));
    CHECK(backend->inspect("k").held);
    CHECK(backend->inspect("k").owner.empty());
    lock->unlock("k");
  }

  TEST_CASE("the label stays through reentrant acquisitions and renewals, and ends with the lease") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    auto lock = dlock::LockBuilder().backend(backend).clock(clock).watchdogLease(30s).ownerLabel().build();
    REQUIRE(lock->tryLock("k"));
    const dlock::LeaseInfo first = backend->inspect("k");
    CHECK(first.owner == expectedLabel(""));
    REQUIRE(lock->tryLock("k"));  // reentrant: count 2
    clock->advance(25s);          // the watchdog renews at 10 s and 20 s
    const dlock::LeaseInfo renewed = backend->inspect("k");
    CHECK(renewed.held);
    CHECK(renewed.remaining > 5s);
    CHECK(renewed.owner == first.owner);
    CHECK(renewed.ownerSince == first.ownerSince);
    lock->unlock("k");
    CHECK(backend->inspect("k").owner == first.owner);
    lock->unlock("k");
    CHECK_FALSE(backend->inspect("k").held);
    CHECK(backend->inspect("k").owner.empty());

    auto fixed = dlock::LockBuilder().backend(backend).clock(clock).leaseTime(1s).ownerLabel().build();
    REQUIRE(fixed->tryLock("k"));
    clock->advance(2s);  // expired: no owner any more
    CHECK_FALSE(backend->inspect("k").held);
    CHECK(backend->inspect("k").owner.empty());
    CHECK_THROWS_AS(fixed->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("a label is any bytes, and too long a text is a ConfigError and too long a label an InvalidArgumentError") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    const std::string binary("nul\0crlf\r\n%s{}", 14);
    auto lock = dlock::LockBuilder().backend(backend).ownerLabel(binary).build();
    REQUIRE(lock->tryLock("k"));
    CHECK(backend->inspect("k").owner == expectedLabel(binary));
    lock->unlock("k");

    CHECK_NOTHROW((void)dlock::LockBuilder().backend(backend).ownerLabel(std::string(dlock::kMaxOwnerTextBytes, 'x')).build());
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(backend).ownerLabel(std::string(dlock::kMaxOwnerTextBytes + 1, 'x')).build(),
                    dlock::ConfigError);
    CHECK_THROWS_AS(backend->lockRecordingOwner("k", "t", 1s, std::string(dlock::kMaxOwnerLabelBytes + 1, 'x')),
                    dlock::InvalidArgumentError);
    CHECK_FALSE(backend->inspect("k").held);  // refused before anything was taken
  }

  TEST_CASE("ownerLabel over a backend that cannot record one is a ConfigError at build") {
    auto forwarding = std::make_shared<dlock::test::ForwardingOperator>(std::make_shared<dlock::MemoryOperator>());
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(forwarding).ownerLabel("x").build(), dlock::ConfigError);
    CHECK_NOTHROW((void)dlock::LockBuilder().backend(forwarding).build());
  }

  TEST_CASE("ownerLabel with fair is a ConfigError at build, not a label silently dropped") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    CHECK_THROWS_AS((void)dlock::LockBuilder().backend(backend).fair(true).ownerLabel("x").build(), dlock::ConfigError);
    CHECK_NOTHROW((void)dlock::LockBuilder().backend(backend).fair(true).build());
  }
}
