// SPDX-License-Identifier: Apache-2.0
// SemaphoreScenarios.h — the semaphore's decisions, checked through ISemaphoreOperator alone, so
// the memory operator (tests/unit/SemaphoreOperatorTest.cpp) and a real redis-server
// (tests/integration/SemaphoreOnRedisTest.cpp) run the same cases. Each takes the operator and a
// name of its own; `passTime(d)` returns once the backend's clock has moved on by at least `d`
// (a virtual clock advanced; a server's TIME waited for). DLOCK_SEMAPHORE_SCENARIOS(Fixture, "Prefix: ")
// registers every case for a fixture with `semaphore` and `passTime` members.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"

namespace dlock::test::sem {

using namespace std::chrono_literals;
using PassTime = std::function<void(std::chrono::milliseconds)>;

inline std::string token(char c) { return std::string(32, c); }
inline const std::string kA = token('a');
inline const std::string kB = token('b');
inline const std::string kC = token('c');
inline const std::string kD = token('d');

// A grant the watch hears (taken before the call that admits it).
inline Grant heard(IGrantWatch& watch) { return watch.waitForGrant(30s); }

inline void permitsAreAdmittedUpToTheCapacity(ISemaphoreOperator& sem, const std::string& name) {
  const SemaphoreAcquireResult a = sem.acquirePermits(name, kA, 2, 3, 10s, 0ms);
  REQUIRE(a.acquired);
  CHECK(a.fencingToken > 0);
  CHECK(a.validity == 0ms);  // the whole lease
  const SemaphoreAcquireResult b = sem.acquirePermits(name, kB, 1, 3, 10s, 0ms);
  REQUIRE(b.acquired);
  CHECK(b.fencingToken > a.fencingToken);
  const SemaphoreAcquireResult c = sem.acquirePermits(name, kC, 1, 3, 10s, 0ms);
  CHECK_FALSE(c.acquired);
  CHECK(c.position == 0);  // a try without a waiter lease is never queued
  CHECK(c.nextExpiry > 0ms);
  CHECK(c.nextExpiry <= 10s);
  const SemaphoreInfo info = sem.inspectSemaphore(name);
  CHECK(info.capacity == 3);
  CHECK(info.inUse == 3);
  REQUIRE(info.holders.size() == 2);
  CHECK(info.holders[0].token == kA);
  CHECK(info.holders[0].permits == 2);
  CHECK(info.holders[0].fencingToken == a.fencingToken);
  CHECK(info.waiters.empty());
  CHECK(sem.releasePermits(name, kA).released);
  CHECK(sem.acquirePermits(name, kC, 2, 3, 10s, 0ms).acquired);
  CHECK(sem.inspectSemaphore(name).inUse == 3);
}

// Strict FIFO: a small request that would fit never passes a large one at the head.
inline void aSmallRequestNeverPassesALargeOneAtTheHead(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 2, 3, 10s, 0ms).acquired);
  const SemaphoreAcquireResult large = sem.acquirePermits(name, kB, 3, 3, 10s, 5s);
  CHECK_FALSE(large.acquired);
  CHECK(large.position == 1);
  const SemaphoreAcquireResult small = sem.acquirePermits(name, kC, 1, 3, 10s, 5s);  // 1 is free
  CHECK_FALSE(small.acquired);
  CHECK(small.position == 2);
  CHECK(sem.inspectSemaphore(name).inUse == 2);
  // Room for the small request but not the large one at the head admits nobody: admission stops
  // at the first waiter that does not fit, and the small one's own call does not pass it.
  CHECK(sem.resizeSemaphore(name, 4) == 0);
  CHECK_FALSE(sem.acquirePermits(name, kC, 1, 4, 10s, 5s).acquired);
  CHECK(sem.resizeSemaphore(name, 3) == 0);
  auto largeHears = sem.watchPermitGrants(name, kB);
  auto smallHears = sem.watchPermitGrants(name, kC);
  const ReleaseResult release = sem.releasePermits(name, kA);
  CHECK(release.released);
  CHECK(release.notified == 1);  // the large request; the small one no longer fits
  const Grant toLarge = heard(*largeHears);
  REQUIRE(toLarge.kind == Grant::Kind::Granted);
  CHECK(sem.extendPermits(name, kB, 10s));  // the grant confirmed
  CHECK_FALSE(sem.acquirePermits(name, kC, 1, 3, 10s, 5s).acquired);
  CHECK(sem.releasePermits(name, kB).notified == 1);
  const Grant toSmall = heard(*smallHears);
  REQUIRE(toSmall.kind == Grant::Kind::Granted);
  CHECK(toSmall.fencingToken > toLarge.fencingToken);
}

// redisson#6664: a release of n woke one waiter.
inline void aReleaseOfThreeAdmitsThreeWaiters(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 3, 3, 10s, 0ms).acquired);
  const std::vector<std::string> waiters = {kB, kC, kD};
  std::vector<std::unique_ptr<IGrantWatch>> watches;
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    const SemaphoreAcquireResult queued = sem.acquirePermits(name, waiters[i], 1, 3, 10s, 5s);
    REQUIRE_FALSE(queued.acquired);
    CHECK(queued.position == i + 1);
    watches.push_back(sem.watchPermitGrants(name, waiters[i]));
  }
  const ReleaseResult release = sem.releasePermits(name, kA);
  CHECK(release.released);
  CHECK(release.notified == 3);
  std::uint64_t lastFence = 0;
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    const Grant grant = heard(*watches[i]);
    REQUIRE(grant.kind == Grant::Kind::Granted);
    CHECK(grant.fencingToken > lastFence);  // admitted in queue order, each its own token
    lastFence = grant.fencingToken;
    CHECK(grant.lease > 0ms);
    CHECK(grant.lease <= 5s);  // what was left of its waiter lease, under its lease
    CHECK(sem.extendPermits(name, waiters[i], 10s));
  }
  const SemaphoreInfo info = sem.inspectSemaphore(name);
  CHECK(info.inUse == 3);
  CHECK(info.waiters.empty());
}

// A holder's permits end by the backend's clock only: a client whose clock runs 10 s ahead (as
// Redisson judged expiry) cannot reclaim them early; once the backend's clock passes the lease
// end, the next call reclaims them, admits the waiter, and the holder's extend says not ours.
inline void permitsEndByTheBackendsClock(ISemaphoreOperator& sem, const std::string& name, const PassTime& passTime) {
  REQUIRE(sem.acquirePermits(name, kA, 2, 2, 2s, 0ms).acquired);
  CHECK_FALSE(sem.acquirePermits(name, kB, 1, 2, 10s, 30s).acquired);
  passTime(1s);
  CHECK_FALSE(sem.acquirePermits(name, kB, 1, 2, 10s, 30s).acquired);  // 1 s of its 2 left
  CHECK(sem.inspectSemaphore(name).inUse == 2);
  passTime(1100ms);
  const SemaphoreAcquireResult waiter = sem.acquirePermits(name, kB, 1, 2, 10s, 30s);
  CHECK(waiter.acquired);  // admitted in its own call, for its whole lease
  CHECK_FALSE(sem.extendPermits(name, kA, 10s));
  const ReleaseResult late = sem.releasePermits(name, kA);
  CHECK_FALSE(late.released);
  CHECK_FALSE(late.releasedEarlier);
  CHECK(sem.inspectSemaphore(name).inUse == 1);
}

// A waiter whose place ran out (it died) is reclaimed and never admitted.
inline void aWaiterWhosePlaceRanOutIsSkipped(ISemaphoreOperator& sem, const std::string& name, const PassTime& passTime) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 1, 30s, 0ms).acquired);
  REQUIRE_FALSE(sem.acquirePermits(name, kB, 1, 1, 10s, 1s).acquired);
  REQUIRE(sem.acquirePermits(name, kC, 1, 1, 10s, 30s).position == 2);
  passTime(1100ms);
  CHECK(sem.inspectSemaphore(name).waiters.size() == 1);
  auto hears = sem.watchPermitGrants(name, kC);
  CHECK(sem.releasePermits(name, kA).notified == 1);
  CHECK(heard(*hears).kind == Grant::Kind::Granted);
  CHECK_FALSE(sem.extendPermits(name, kB, 10s));
  CHECK(sem.extendPermits(name, kC, 10s));
}

inline void anotherCapacityIsAConfigErrorNamingBoth(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 10, 10s, 0ms).acquired);
  try {
    (void)sem.acquirePermits(name, kB, 1, 20, 10s, 5s);
    FAIL("another capacity was accepted");
  } catch (const ConfigError& error) {
    const std::string what = error.what();
    CHECK(what.find("10") != std::string::npos);
    CHECK(what.find("20") != std::string::npos);
  }
  CHECK(sem.inspectSemaphore(name).capacity == 10);  // not overwritten (Redisson #4678)
  CHECK(sem.inspectSemaphore(name).waiters.empty());
  CHECK(sem.acquirePermits(name, kB, 1, 10, 10s, 0ms).acquired);
}

// resize is the one way to change the capacity: a larger one admits who fits now; a smaller one
// lets holders keep their permits and admits nobody until enough are released.
inline void aResizeIsExplicitAndHoldersKeepTheirPermits(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 1, 10s, 0ms).acquired);
  REQUIRE_FALSE(sem.acquirePermits(name, kB, 1, 1, 10s, 5s).acquired);
  auto hears = sem.watchPermitGrants(name, kB);
  CHECK(sem.resizeSemaphore(name, 2) == 1);
  CHECK(heard(*hears).kind == Grant::Kind::Granted);
  CHECK(sem.extendPermits(name, kB, 10s));
  CHECK(sem.inspectSemaphore(name).capacity == 2);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kC, 1, 1, 10s, 0ms), ConfigError);

  CHECK(sem.resizeSemaphore(name, 1) == 0);
  CHECK(sem.inspectSemaphore(name).inUse == 2);  // above the capacity until released
  REQUIRE(sem.acquirePermits(name, kC, 1, 1, 10s, 5s).position == 1);
  CHECK(sem.releasePermits(name, kA).notified == 0);  // 1 in use of 1
  CHECK(sem.releasePermits(name, kB).notified == 1);
  CHECK(sem.acquirePermits(name, kC, 1, 1, 10s, 5s).acquired);
}

// A grant whose reply or message was lost is settled by its token: asking again answers the same
// grant, counted once.
inline void anAcquireIsIdempotentForItsToken(ISemaphoreOperator& sem, const std::string& name) {
  const SemaphoreAcquireResult first = sem.acquirePermits(name, kA, 1, 2, 10s, 0ms);
  REQUIRE(first.acquired);
  const SemaphoreAcquireResult again = sem.acquirePermits(name, kA, 1, 2, 10s, 0ms);
  REQUIRE(again.acquired);
  CHECK(again.fencingToken == first.fencingToken);
  CHECK(again.validity > 0ms);
  CHECK(again.validity <= 10s);
  CHECK(sem.inspectSemaphore(name).inUse == 1);

  REQUIRE(sem.acquirePermits(name, kB, 1, 2, 10s, 0ms).acquired);
  REQUIRE_FALSE(sem.acquirePermits(name, kC, 1, 2, 10s, 5s).acquired);
  REQUIRE(sem.releasePermits(name, kA).notified == 1);  // to kC, whose message nobody heard
  const SemaphoreAcquireResult recheck = sem.acquirePermits(name, kC, 1, 2, 10s, 5s);
  CHECK(recheck.acquired);
  CHECK(recheck.fencingToken > first.fencingToken);
  CHECK(recheck.validity > 0ms);
  CHECK(recheck.validity <= 5s);  // the claim: what was left of its place
  CHECK(sem.inspectSemaphore(name).inUse == 2);
}

// A retried release whose first try ran is told so by the record; a stranger's is not ours.
inline void aRetriedReleaseIsDecidedByTheRecord(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 1, 10s, 0ms).acquired);
  CHECK_FALSE(sem.releasePermits(name, kB).released);
  const ReleaseResult first = sem.releasePermits(name, kA);
  CHECK(first.released);
  CHECK_FALSE(first.releasedEarlier);
  const ReleaseResult retry = sem.releasePermits(name, kA);
  CHECK(retry.released);
  CHECK(retry.releasedEarlier);
  CHECK_FALSE(sem.extendPermits(name, kA, 10s));
  // The token is spent: an acquire of it still on its way is refused.
  const SemaphoreAcquireResult late = sem.acquirePermits(name, kA, 1, 1, 10s, 5s);
  CHECK_FALSE(late.acquired);
  CHECK(late.position == 0);
}

// curator#982/#1112: a grant that raced the waiter's give-up is released, not orphaned; the
// tombstone refuses an attempt of the token that arrives after the leave.
inline void aLeaveReleasesAGrantThatRacedIt(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 1, 10s, 0ms).acquired);
  REQUIRE_FALSE(sem.acquirePermits(name, kB, 1, 1, 10s, 5s).acquired);
  REQUIRE_FALSE(sem.acquirePermits(name, kC, 1, 1, 10s, 5s).acquired);
  auto cHears = sem.watchPermitGrants(name, kC);
  REQUIRE(sem.releasePermits(name, kA).notified == 1);  // to kB, which is giving up
  CHECK(sem.leavePermitQueue(name, kB));
  CHECK(heard(*cHears).kind == Grant::Kind::Granted);  // handed on
  CHECK(sem.extendPermits(name, kC, 10s));
  const SemaphoreAcquireResult late = sem.acquirePermits(name, kB, 1, 1, 10s, 5s);
  CHECK_FALSE(late.acquired);
  CHECK(late.position == 0);
  CHECK_FALSE(sem.releasePermits(name, kB).released);
  CHECK(sem.inspectSemaphore(name).inUse == 1);
}

inline void aLeaveLeavesATombstone(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 1, 10s, 0ms).acquired);
  REQUIRE(sem.acquirePermits(name, kB, 1, 1, 10s, 5s).position == 1);
  CHECK_FALSE(sem.leavePermitQueue(name, kB));
  CHECK(sem.inspectSemaphore(name).waiters.empty());
  CHECK_FALSE(sem.leavePermitQueue(name, kC));  // never seen: a tombstone all the same
  REQUIRE(sem.releasePermits(name, kA).released);
  for (const std::string& gone : {kB, kC}) {
    const SemaphoreAcquireResult late = sem.acquirePermits(name, gone, 1, 1, 10s, 5s);
    CHECK_FALSE(late.acquired);
    CHECK(late.position == 0);
  }
  CHECK(sem.inspectSemaphore(name).inUse == 0);
  CHECK(sem.acquirePermits(name, kD, 1, 1, 10s, 0ms).acquired);
}

// Bad input is refused before anything reaches the backend.
inline void badInputIsRefusedBeforeAnythingIsSent(ISemaphoreOperator& sem, const std::string& name) {
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 0, 3, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 4, 3, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 1, 0, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 1, kMaxSemaphorePermits + 1, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 1, 3, 0ms, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 1, 3, kMaxLeaseTime + 1ms, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, kA, 1, 3, 10s, -1ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits("", kA, 1, 3, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, "a|b", 1, 3, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.acquirePermits(name, "", 1, 3, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.releasePermits(name, "a|b"), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.extendPermits(name, kA, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.extendPermitsAll({{name, kA}, {name, "x y"}}, 10s), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.leavePermitQueue(std::string(kMaxKeyBytes + 1, 'k'), kA), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.watchPermitGrants(name, ""), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.resizeSemaphore(name, 0), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.resizeSemaphore(name, kMaxSemaphorePermits + 1), InvalidArgumentError);
  CHECK_THROWS_AS((void)sem.inspectSemaphore(""), InvalidArgumentError);
}

// The watchdog's batch: one result per lease, in order, each the token's own.
inline void theBatchExtendRenewsEachTokensOwnHold(ISemaphoreOperator& sem, const std::string& name) {
  REQUIRE(sem.acquirePermits(name, kA, 1, 2, 10s, 0ms).acquired);
  REQUIRE(sem.acquirePermits(name + "-2", kB, 1, 2, 10s, 0ms).acquired);
  const std::vector<ExtendResult> results = sem.extendPermitsAll({{name, kA}, {name, kB}, {name + "-2", kB}}, 20s);
  REQUIRE(results.size() == 3);
  CHECK(results[0].extended);
  CHECK_FALSE(results[1].extended);  // kB holds nothing of `name`
  CHECK(results[2].extended);
  CHECK(sem.inspectSemaphore(name).holders.at(0).remaining > 10s);
}

}  // namespace dlock::test::sem

// One test case per scenario, each on its own name, for `Fixture` (its `semaphore` and `passTime`).
#define DLOCK_SEMAPHORE_SCENARIOS(Fixture, prefix) \
  TEST_CASE_FIXTURE(Fixture, prefix "permits are admitted up to the capacity, and a try without a place is not queued") { \
    dlock::test::sem::permitsAreAdmittedUpToTheCapacity(semaphore, "admit"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a small request never passes a large one at the head of the queue") { \
    dlock::test::sem::aSmallRequestNeverPassesALargeOneAtTheHead(semaphore, "fifo"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a release of 3 permits admits 3 waiters of 1 in one step") { \
    dlock::test::sem::aReleaseOfThreeAdmitsThreeWaiters(semaphore, "three"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "permits end by the backend's clock, not a client's running ahead") { \
    dlock::test::sem::permitsEndByTheBackendsClock(semaphore, "expiry", passTime); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a waiter whose place ran out is skipped") { \
    dlock::test::sem::aWaiterWhosePlaceRanOutIsSkipped(semaphore, "dead", passTime); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "another capacity is a ConfigError naming both, and the stored one stands") { \
    dlock::test::sem::anotherCapacityIsAConfigErrorNamingBoth(semaphore, "capacity"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a resize is explicit: a larger capacity admits, a smaller one lets holders keep theirs") { \
    dlock::test::sem::aResizeIsExplicitAndHoldersKeepTheirPermits(semaphore, "resize"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "an acquire is idempotent for its token, and a grant whose message was lost is found") { \
    dlock::test::sem::anAcquireIsIdempotentForItsToken(semaphore, "again"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a retried release is decided by the release record, and the token is spent") { \
    dlock::test::sem::aRetriedReleaseIsDecidedByTheRecord(semaphore, "record"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a leave releases a grant that raced it and hands it on") { \
    dlock::test::sem::aLeaveReleasesAGrantThatRacedIt(semaphore, "race"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "a leave leaves a tombstone that refuses a late attempt of the token") { \
    dlock::test::sem::aLeaveLeavesATombstone(semaphore, "tombstone"); \
  } \
  TEST_CASE_FIXTURE(Fixture, prefix "the batch extend renews each token's own hold") { \
    dlock::test::sem::theBatchExtendRenewsEachTokensOwnHold(semaphore, "batch"); \
  }
