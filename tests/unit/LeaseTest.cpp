// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <utility>

#include "Fixtures.h"
#include "LogCapture.h"
#include "dlock/LockError.h"

using namespace std::chrono_literals;
using dlock::test::VirtualFixture;

namespace {

// A backend that refuses releases while `refuse` is set, as a server refuses a script (NOPERM).
class RefusingRelease final : public dlock::test::ForwardingOperator {
 public:
  using ForwardingOperator::ForwardingOperator;
  std::atomic<bool> refuse{false};
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    if (refuse) throw dlock::BackendError("dlock: forwarding://: NOPERM this user has no permissions to run PUBLISH");
    return inner_->unlock(key, token);
  }
};

}  // namespace

TEST_SUITE("Lease") {
  TEST_CASE("acquire returns a lease that carries its key, token and fencing token") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::Lease lease = lock->acquire("k");
    REQUIRE(lease);
    CHECK(lease.isHeld());
    CHECK(lease.key() == "k");
    CHECK(lease.token() == f.backend->holderOf("k"));
    CHECK(lease.token().size() == 32);
    CHECK(lease.fencingToken() == 1);
    CHECK_FALSE(lock->isHeld("k"));  // not a thread hold
    lease.release();
    CHECK_FALSE(lease);
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("a lease moved to another thread is released there") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::Lease lease = lock->acquire("k");
    REQUIRE(lease);
    std::thread worker([moved = std::move(lease), &f]() mutable {
      CHECK(moved.isHeld());
      moved.release();
      CHECK(f.backend->holderOf("k").empty());
    });
    worker.join();
    CHECK_FALSE(lease);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  }

  TEST_CASE("a lease releases its key when destroyed") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    {
      dlock::Lease lease = lock->acquire("k");
      REQUIRE(lease);
      CHECK_FALSE(f.backend->holderOf("k").empty());
    }
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("move assignment releases the lease it replaces") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::Lease a = lock->acquire("a");
    dlock::Lease b = lock->acquire("b");
    a = std::move(b);
    CHECK(f.backend->holderOf("a").empty());
    CHECK(a.key() == "b");
  }

  TEST_CASE("an acquire that times out returns an empty lease") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::Lease held = lock->acquire("k");
    dlock::AcquireOptions options;
    options.waitTime = 20ms;
    dlock::Lease second;
    dlock::test::onVirtualTime(*f.clock, [&] { second = lock->acquire("k", options); }, 5ms);
    CHECK_FALSE(second);
    CHECK_THROWS_AS(second.release(), dlock::NotOwnerError);
    CHECK_THROWS_AS((void)second.key(), dlock::NotOwnerError);
    options.waitTime = 0ms;  // try once
    CHECK_FALSE(lock->acquire("k", options));
  }

  TEST_CASE("releasing an expired lease throws LockLostError and empties it") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::AcquireOptions options;
    options.leaseTime = 5s;
    dlock::Lease lease = lock->acquire("k", options);
    f.clock->advance(5s);
    CHECK_FALSE(lease.isHeld());
    CHECK_THROWS_AS(lease.release(), dlock::LockLostError);
    CHECK_FALSE(lease);
  }

  TEST_CASE("a lease destroyed while the backend is down logs the failure and does not throw") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::test::LogCapture log;
    {
      dlock::Lease lease = lock->acquire("k");
      f.backend->failNextCalls(1);
    }  // the destructor's release fails
    CHECK(log.text().find("releasing 'k' failed") != std::string::npos);
    CHECK(log.text().find("injected connection failure") != std::string::npos);
    CHECK(f.backend->inspect("k").held);  // the lease is still there ...
    f.clock->advance(30s);
    CHECK_FALSE(f.backend->inspect("k").held);  // ... until its TTL
  }

  TEST_CASE("a release that fails with ConnectionError keeps the lease for a retry") {
    VirtualFixture f;
    auto lock = f.leased(30s);
    dlock::Lease lease = lock->acquire("k");
    f.backend->failNextCalls(1);
    CHECK_THROWS_AS(lease.release(), dlock::ConnectionError);
    CHECK(lease);
    lease.release();
    CHECK(f.backend->holderOf("k").empty());
  }

  TEST_CASE("a release refused with BackendError keeps the lease, and its destructor then ends the renewals") {
    VirtualFixture f;
    auto backend = std::make_shared<RefusingRelease>(f.backend);
    auto lock = dlock::LockBuilder().backend(backend).clock(f.clock).watchdogLease(30s).build();
    dlock::test::LogCapture log;
    {
      dlock::Lease lease = lock->acquire("k");
      backend->refuse = true;
      CHECK_THROWS_AS(lease.release(), dlock::BackendError);
      CHECK(lease);  // still ours to release, as after a ConnectionError
      CHECK(lease.isHeld());
      f.clock->advance(10s);
      CHECK(lock->stats().renewals == 1);
    }  // the destructor tries once more, fails again, and gives the lease up
    CHECK(log.text().find("releasing 'k' failed") != std::string::npos);
    for (int step = 0; step < 3; ++step) f.clock->advance(10s);
    CHECK(lock->stats().renewals == 1);  // not renewed for ever
    CHECK_FALSE(f.backend->inspect("k").held);
  }

  TEST_CASE("a lease under the watchdog outlives its lease time and its lock") {
    VirtualFixture f;
    dlock::Lease lease;
    {
      auto lock = f.watched(30s);
      lease = lock->acquire("k");
    }  // the lock object is gone; the lease keeps the machinery alive
    for (int step = 0; step < 9; ++step) f.clock->advance(10s);
    CHECK(lease.isHeld());
    CHECK(f.backend->inspect("k").held);
    lease.release();
  }
}
