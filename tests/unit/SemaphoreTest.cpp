// SPDX-License-Identifier: Apache-2.0
// The Semaphore (SemaphoreBuilder, PermitLease) on the memory operator and a virtual clock: the
// capacity, bad input, leases in the backend's time, the watchdog, lost handlers, releases that
// admit every waiter that fits, grants whose reply was lost. Each check that guards against a
// broken variant the issue names (a release without the owner check, expiry judged by the client's
// clock) is also run on a test double of that variant and shown to catch it.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "Fixtures.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/core/SemaphoreBuilder.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::Event;

namespace {

// Every call passed to a MemoryOperator; the broken variants below override the calls they bend.
class ForwardingSemaphores : public dlock::IOperator, public dlock::ISemaphoreOperator {
 public:
  explicit ForwardingSemaphores(std::shared_ptr<dlock::MemoryOperator> inner) : inner_(std::move(inner)) {}
  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->lock(key, token, ttl);
  }
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    return inner_->unlock(key, token);
  }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->extend(key, token, ttl);
  }
  [[nodiscard]] std::string describe() const override { return "forwarding://"; }

 protected:
  dlock::SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                                 std::uint32_t capacity, std::chrono::milliseconds lease,
                                                 std::chrono::milliseconds waiterLease) override {
    return inner_->acquirePermits(name, token, permits, capacity, lease, waiterLease);
  }
  dlock::ReleaseResult doReleasePermits(std::string_view name, std::string_view token) override {
    return inner_->releasePermits(name, token);
  }
  bool doExtendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) override {
    return inner_->extendPermits(name, token, lease);
  }
  bool doLeavePermitQueue(std::string_view name, std::string_view token) override {
    return inner_->leavePermitQueue(name, token);
  }
  std::unique_ptr<dlock::IGrantWatch> doWatchPermitGrants(std::string_view name, std::string_view token) override {
    return inner_->watchPermitGrants(name, token);
  }
  std::uint32_t doResizeSemaphore(std::string_view name, std::uint32_t capacity) override {
    return inner_->resizeSemaphore(name, capacity);
  }
  dlock::SemaphoreInfo doInspectSemaphore(std::string_view name) override { return inner_->inspectSemaphore(name); }

  const std::shared_ptr<dlock::MemoryOperator> inner_;
};

// The first `count` acquires run on the backend, and then their replies are lost.
class LosingAcquireReplies final : public ForwardingSemaphores {
 public:
  LosingAcquireReplies(std::shared_ptr<dlock::MemoryOperator> inner, int count)
      : ForwardingSemaphores(std::move(inner)), toLose_(count) {}

 private:
  dlock::SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                                 std::uint32_t capacity, std::chrono::milliseconds lease,
                                                 std::chrono::milliseconds waiterLease) override {
    auto result = ForwardingSemaphores::doAcquirePermits(name, token, permits, capacity, lease, waiterLease);
    if (toLose_.fetch_sub(1) > 0) throw dlock::ConnectionError("dlock: test: the reply was lost");
    return result;
  }
  std::atomic<int> toLose_;
};

// Counts the batches the watchdog sends.
class CountingBatches final : public ForwardingSemaphores {
 public:
  using ForwardingSemaphores::ForwardingSemaphores;
  std::atomic<int> batches{0};

 private:
  std::vector<dlock::ExtendResult> doExtendPermitsAll(const std::vector<dlock::LeaseRef>& leases,
                                                      std::chrono::milliseconds lease) override {
    ++batches;
    return inner_->extendPermitsAll(leases, lease);
  }
};

// Broken: a release of permits not (or no longer) the caller's frees the first holder's instead.
class ReleaseWithoutOwnerCheck final : public ForwardingSemaphores {
 public:
  using ForwardingSemaphores::ForwardingSemaphores;

 private:
  dlock::ReleaseResult doReleasePermits(std::string_view name, std::string_view token) override {
    dlock::ReleaseResult result = inner_->releasePermits(name, token);
    if (result.released || result.releasedEarlier) return result;
    const dlock::SemaphoreInfo info = inner_->inspectSemaphore(name);
    if (info.holders.empty()) return result;
    return inner_->releasePermits(name, info.holders.front().token);
  }
};

// Broken, as Redisson's permit-expirable semaphore: each client writes its holders' expiry by its
// own clock, and an acquire first reclaims every holder whose expiry its own clock has passed.
class ExpiryByClientClock final : public ForwardingSemaphores {
 public:
  using Expiries = std::map<std::string, dlock::Clock::time_point, std::less<>>;
  ExpiryByClientClock(std::shared_ptr<dlock::MemoryOperator> inner, std::shared_ptr<dlock::Clock> clientClock,
                      std::shared_ptr<Expiries> shared)
      : ForwardingSemaphores(std::move(inner)), clock_(std::move(clientClock)), expiries_(std::move(shared)) {}

 private:
  dlock::SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                                 std::uint32_t capacity, std::chrono::milliseconds lease,
                                                 std::chrono::milliseconds waiterLease) override {
    for (const auto& holder : inner_->inspectSemaphore(name).holders) {
      const auto expiry = expiries_->find(holder.token);
      if (expiry != expiries_->end() && expiry->second <= clock_->now()) {
        (void)inner_->releasePermits(name, holder.token);
      }
    }
    auto result = inner_->acquirePermits(name, token, permits, capacity, lease, waiterLease);
    if (result.acquired) (*expiries_)[std::string(token)] = clock_->now() + lease;
    return result;
  }
  const std::shared_ptr<dlock::Clock> clock_;
  const std::shared_ptr<Expiries> expiries_;
};

struct SemaphoreFixture : dlock::test::VirtualFixture {
  // A semaphore over `on` (the fixture's backend when null), with a fixed lease unless `lease` is unset.
  std::shared_ptr<dlock::Semaphore> make(std::uint32_t capacity, std::optional<std::chrono::milliseconds> lease = 30s,
                                         std::shared_ptr<dlock::IOperator> on = nullptr,
                                         std::shared_ptr<dlock::Clock> with = nullptr) const {
    dlock::SemaphoreBuilder builder;
    builder.backend(on ? on : backend).name("s").permits(capacity).clock(with ? with : clock).waiterLease(3s);
    if (lease) builder.leaseTime(*lease);
    return builder.build();
  }
};

// Blocks (real time, bounded) until `semaphore` has `count` waiters queued.
bool waitForWaiters(dlock::Semaphore& semaphore, std::size_t count) {
  const auto give = std::chrono::steady_clock::now() + 10s;
  while (semaphore.inspect().waiters.size() != count) {
    if (std::chrono::steady_clock::now() > give) return false;
    std::this_thread::yield();
  }
  return true;
}

// A takes the one permit for 5 s; after its lease ends B takes it; then A releases late. Returns
// the permits free after that release (0 when A's release freed nobody else's).
std::uint32_t freeAfterALateRelease(const SemaphoreFixture& f, const std::shared_ptr<dlock::IOperator>& on) {
  auto semaphore = f.make(1, 5s, on);
  dlock::PermitLease a = semaphore->tryAcquire(1);
  REQUIRE(a);
  f.clock->advance(6s);
  dlock::PermitLease b = semaphore->tryAcquire(1);
  REQUIRE(b);
  CHECK_THROWS_AS(a.release(), dlock::LockLostError);
  CHECK(b.isHeld());
  return semaphore->availablePermits();
}

// Four permits held for 5 s by clients on the backend's clock; then a client whose clock runs 10 s
// ahead tries for one. Returns how many permits are held after its try (4: it over-admitted nothing).
std::uint32_t heldAfterAClientAheadTries(const SemaphoreFixture& f, const std::shared_ptr<dlock::IOperator>& onTime,
                                         const std::shared_ptr<dlock::IOperator>& ahead,
                                         const std::shared_ptr<dlock::Clock>& aheadClock) {
  auto holders = f.make(4, 5s, onTime);
  std::vector<dlock::PermitLease> held;
  for (int i = 0; i < 4; ++i) held.push_back(holders->tryAcquire(1));
  for (const auto& each : held) REQUIRE(each);
  auto late = f.make(4, 5s, ahead, aheadClock);
  dlock::PermitLease extra = late->tryAcquire(1);
  const dlock::SemaphoreInfo info = holders->inspect();
  return info.inUse;
}

}  // namespace

TEST_SUITE("Semaphore") {
  TEST_CASE("permits up to the capacity are held at once, past it a try gets an empty PermitLease") {
    SemaphoreFixture f;
    auto semaphore = f.make(4);
    dlock::PermitLease two = semaphore->acquire(2);
    dlock::PermitLease one = semaphore->tryAcquire(1);
    REQUIRE(two);
    REQUIRE(one);
    CHECK(two.permits() == 2);
    CHECK(two.name() == "s");
    CHECK(one.fencingToken() > two.fencingToken());
    CHECK(semaphore->availablePermits() == 1);
    dlock::PermitLease three = semaphore->tryAcquire(2);
    CHECK_FALSE(three);
    CHECK(semaphore->inspect().waiters.empty());  // a single try never queues
    two.release();
    CHECK(semaphore->availablePermits() == 3);
    CHECK(semaphore->tryAcquire(3));
  }

  TEST_CASE("release twice is NotOwnerError, a moved-from PermitLease is empty, the destructor releases") {
    SemaphoreFixture f;
    auto semaphore = f.make(2);
    dlock::PermitLease p = semaphore->tryAcquire(1);
    REQUIRE(p);
    dlock::PermitLease moved = std::move(p);
    CHECK_FALSE(p);  // NOLINT(bugprone-use-after-move): the moved-from state is what is checked
    CHECK_THROWS_AS(p.release(), dlock::NotOwnerError);
    moved.release();
    CHECK_FALSE(moved);
    CHECK_THROWS_AS(moved.release(), dlock::NotOwnerError);
    CHECK_THROWS_AS((void)moved.fencingToken(), dlock::NotOwnerError);
    CHECK_THROWS_AS((void)moved.permits(), dlock::NotOwnerError);
    { dlock::PermitLease scoped = semaphore->tryAcquire(2); REQUIRE(scoped); }
    CHECK(semaphore->availablePermits() == 2);
  }

  TEST_CASE("bad input is an InvalidArgumentError and reaches no backend") {
    SemaphoreFixture f;
    const std::uint64_t before = f.backend->calls();
    CHECK_THROWS_AS(f.make(0), dlock::InvalidArgumentError);
    CHECK_THROWS_AS(f.make(dlock::kMaxSemaphorePermits + 1), dlock::InvalidArgumentError);
    CHECK_THROWS_AS(dlock::SemaphoreBuilder().backend(f.backend).permits(1).build(), dlock::InvalidArgumentError);
    auto semaphore = f.make(4);
    CHECK_THROWS_AS((void)semaphore->acquire(0), dlock::InvalidArgumentError);
    CHECK_THROWS_WITH_AS((void)semaphore->tryAcquire(5), doctest::Contains("not from 1 to the capacity 4"),
                         dlock::InvalidArgumentError);
    dlock::AcquireOptions badLease;
    badLease.leaseTime = 0ms;
    CHECK_THROWS_AS((void)semaphore->acquire(1, badLease), dlock::InvalidArgumentError);
    badLease.leaseTime = dlock::kMaxLeaseTime + 1ms;
    CHECK_THROWS_AS((void)semaphore->acquire(1, badLease), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)semaphore->resize(0), dlock::InvalidArgumentError);
    CHECK(f.backend->calls() == before);
  }

  TEST_CASE("a backend without semaphores is a ConfigError at build, and Redlock's says why") {
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (int i = 0; i < 3; ++i) members.push_back(std::make_shared<dlock::MemoryOperator>());
    auto redlock = std::make_shared<dlock::RedlockOperator>(members);
    CHECK_THROWS_WITH_AS(dlock::SemaphoreBuilder().backend(redlock).name("s").permits(2).build(),
                         doctest::Contains("Redlock spreads a name over independent servers"), dlock::ConfigError);
    CHECK_THROWS_AS(dlock::SemaphoreBuilder().name("s").permits(2).build(), dlock::ConfigError);
    CHECK_THROWS_AS(dlock::SemaphoreBuilder().backend(members[0]).name("s").permits(2).waiterLease(1ms).build(),
                    dlock::ConfigError);
  }

  TEST_CASE("another capacity stored is a ConfigError naming both at the first acquire, resize changes it for all") {
    SemaphoreFixture f;
    auto four = f.make(4);
    auto eight = f.make(8);  // build sends nothing: the mismatch shows at first use
    dlock::PermitLease p = four->tryAcquire(1);
    REQUIRE(p);
    CHECK_THROWS_WITH_AS((void)eight->tryAcquire(1), doctest::Contains("stored with capacity 4, not 8"),
                         dlock::ConfigError);
    CHECK(eight->resize(8) == 0);
    CHECK(eight->capacity() == 8);
    CHECK(eight->availablePermits() == 7);
    CHECK(eight->tryAcquire(7));
    CHECK_THROWS_AS((void)four->tryAcquire(1), dlock::ConfigError);  // built with the old one
  }

  TEST_CASE("a release of three admits the three head waiters in the release itself") {
    SemaphoreFixture f;
    auto semaphore = f.make(4);
    dlock::PermitLease three = semaphore->tryAcquire(3);
    dlock::PermitLease one = semaphore->tryAcquire(1);
    REQUIRE(three);
    REQUIRE(one);
    std::vector<dlock::PermitLease> got(3);
    std::vector<std::thread> waiters;
    dlock::AcquireOptions wait;
    wait.waitTime = 10s;
    for (std::size_t i = 0; i < 3; ++i) {
      waiters.emplace_back([&, i] { got[i] = semaphore->acquire(1, wait); });
      REQUIRE(waitForWaiters(*semaphore, i + 1));
    }
    three.release();
    const dlock::SemaphoreInfo after = semaphore->inspect();  // before any waiter woke and asked
    CHECK(after.waiters.empty());
    CHECK(after.inUse == 4);
    for (auto& waiter : waiters) waiter.join();
    for (const auto& each : got) CHECK(each.isHeld());
  }

  TEST_CASE("a small request does not pass a large one at the head") {
    SemaphoreFixture f;
    auto semaphore = f.make(4);
    dlock::PermitLease three = semaphore->tryAcquire(3);
    REQUIRE(three);
    dlock::PermitLease big;
    std::thread waiter([&] {
      dlock::AcquireOptions wait;
      wait.waitTime = 10s;
      big = semaphore->acquire(2, wait);
    });
    REQUIRE(waitForWaiters(*semaphore, 1));
    CHECK_FALSE(semaphore->tryAcquire(1));  // one is free, but the head wants two
    three.release();
    waiter.join();
    CHECK(big.permits() == 2);
  }

  TEST_CASE("a wait that times out leaves the queue") {
    SemaphoreFixture f;
    auto semaphore = f.make(1);
    dlock::PermitLease p = semaphore->tryAcquire(1);
    REQUIRE(p);
    dlock::PermitLease late;
    dlock::test::onVirtualTime(*f.clock, [&] { late = semaphore->tryAcquire(1, 20ms); }, 5ms);
    CHECK_FALSE(late);
    CHECK(semaphore->inspect().waiters.empty());
  }

  TEST_CASE("permits whose lease ended go back by the backend's clock, and their release is LockLostError") {
    SemaphoreFixture f;
    CHECK(freeAfterALateRelease(f, f.backend) == 0);
  }

  TEST_CASE("the late-release check catches a release without the owner check") {
    SemaphoreFixture f;
    CHECK(freeAfterALateRelease(f, std::make_shared<ReleaseWithoutOwnerCheck>(f.backend)) == 1);
  }

  TEST_CASE("a client whose clock is 10 s ahead over-admits nothing") {
    SemaphoreFixture f;
    auto ahead = std::make_shared<dlock::VirtualClock>();
    ahead->advance(10s);
    CHECK(heldAfterAClientAheadTries(f, f.backend, f.backend, ahead) == 4);
  }

  TEST_CASE("the clock-ahead check catches permit expiry judged by the client's clock") {
    SemaphoreFixture f;
    auto ahead = std::make_shared<dlock::VirtualClock>();
    ahead->advance(10s);
    auto expiries = std::make_shared<ExpiryByClientClock::Expiries>();
    auto onTime = std::make_shared<ExpiryByClientClock>(f.backend, f.clock, expiries);
    auto early = std::make_shared<ExpiryByClientClock>(f.backend, ahead, expiries);
    CHECK(heldAfterAClientAheadTries(f, onTime, early, ahead) < 4);  // reclaimed live permits
  }

  TEST_CASE("the watchdog renews permits past their lease, one found gone is reported and release says so") {
    SemaphoreFixture f;
    auto semaphore = f.make(2, std::nullopt);  // the watchdog, 30 s
    std::atomic<std::uint64_t> lostFence{0};
    Event lost;
    semaphore->onPermitsLost([&](std::string_view name, std::uint64_t fence) {
      CHECK(name == "s");
      lostFence = fence;
      lost.set();
    });
    dlock::PermitLease p = semaphore->acquire(2);
    REQUIRE(p);
    for (int i = 0; i < 6; ++i) f.clock->advance(10s);  // 60 s: renewed every 10 s
    CHECK(p.isHeld());
    CHECK(p.remaining() > 0ms);
    CHECK(semaphore->availablePermits() == 0);
    f.backend->forgetLeases();  // the server restarted empty
    f.clock->advance(10s);      // the next renewal finds the permits gone
    REQUIRE(lost.wait());
    CHECK(lostFence.load() == p.fencingToken());
    CHECK_FALSE(p.isHeld());
    CHECK(p.remaining() == 0ms);
    CHECK_THROWS_AS(p.release(), dlock::LockLostError);
    CHECK(semaphore->stats().lostLeases == 1);
  }

  TEST_CASE("the watchdog renews every PermitLease of a semaphore in one batch call") {
    SemaphoreFixture f;
    auto counting = std::make_shared<CountingBatches>(f.backend);
    auto semaphore = f.make(4, std::nullopt, counting);  // the watchdog, 30 s: renewed every 10 s
    std::vector<dlock::PermitLease> held;
    for (int i = 0; i < 3; ++i) held.push_back(semaphore->tryAcquire(1));
    f.clock->advance(10s);
    CHECK(counting->batches == 1);  // one extendPermitsAll for the three
    CHECK(semaphore->stats().renewals == 3);
    for (const auto& each : held) CHECK(each.remaining() == 30s);
  }

  TEST_CASE("a grant whose reply was lost is settled by token: the wait holds it once, a single try leaves it") {
    SemaphoreFixture f;
    auto lossy = std::make_shared<LosingAcquireReplies>(f.backend, 1);
    auto semaphore = f.make(2, 30s, lossy);
    dlock::AcquireOptions wait;
    wait.waitTime = 10s;
    dlock::PermitLease p;
    // The retry, after an outage's back-off on the virtual clock, finds the same grant.
    dlock::test::onVirtualTime(*f.clock, [&] { p = semaphore->acquire(1, wait); }, 10ms);
    REQUIRE(p);
    CHECK(semaphore->availablePermits() == 1);
    p.release();
    CHECK(semaphore->availablePermits() == 2);

    auto lossyOnce = std::make_shared<LosingAcquireReplies>(f.backend, 1);
    auto once = f.make(2, 30s, lossyOnce);
    CHECK_THROWS_AS((void)once->tryAcquire(2), dlock::ConnectionError);
    CHECK(once->availablePermits() == 2);  // the leave released what the lost try took
  }
}
