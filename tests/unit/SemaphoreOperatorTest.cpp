// SPDX-License-Identifier: Apache-2.0
// The semaphore's backend surface on the memory operator and a virtual clock: the cases of
// SemaphoreScenarios.h (which also run on a real redis-server), and what only memory shows.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>

#include "SemaphoreScenarios.h"
#include "dlock/LockError.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
namespace sem = dlock::test::sem;

namespace {

struct MemorySemaphoreFixture {
  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::shared_ptr<dlock::MemoryOperator> backend = std::make_shared<dlock::MemoryOperator>(clock);
  dlock::ISemaphoreOperator& semaphore = *backend;
  sem::PassTime passTime = [this](std::chrono::milliseconds step) { clock->advance(step); };
};

}  // namespace

TEST_SUITE("SemaphoreOperator") {
  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "permits are admitted up to the capacity, and a try without a place is not queued") {
    sem::permitsAreAdmittedUpToTheCapacity(semaphore, "admit");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a small request never passes a large one at the head of the queue") {
    sem::aSmallRequestNeverPassesALargeOneAtTheHead(semaphore, "fifo");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a release of 3 permits admits 3 waiters of 1 in one step") {
    sem::aReleaseOfThreeAdmitsThreeWaiters(semaphore, "three");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "permits end by the backend's clock, not a client's running ahead") {
    sem::permitsEndByTheBackendsClock(semaphore, "expiry", passTime);
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a waiter whose place ran out is skipped") {
    sem::aWaiterWhosePlaceRanOutIsSkipped(semaphore, "dead", passTime);
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "another capacity is a ConfigError naming both, and the stored one stands") {
    sem::anotherCapacityIsAConfigErrorNamingBoth(semaphore, "capacity");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a resize is explicit: a larger capacity admits, a smaller one lets holders keep theirs") {
    sem::aResizeIsExplicitAndHoldersKeepTheirPermits(semaphore, "resize");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "an acquire is idempotent for its token, and a grant whose message was lost is found") {
    sem::anAcquireIsIdempotentForItsToken(semaphore, "again");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a retried release is decided by the release record, and the token is spent") {
    sem::aRetriedReleaseIsDecidedByTheRecord(semaphore, "record");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a leave releases a grant that raced it and hands it on") {
    sem::aLeaveReleasesAGrantThatRacedIt(semaphore, "race");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a leave leaves a tombstone that refuses a late attempt of the token") {
    sem::aLeaveLeavesATombstone(semaphore, "tombstone");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "the batch extend renews each token's own hold") {
    sem::theBatchExtendRenewsEachTokensOwnHold(semaphore, "batch");
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "bad input is an InvalidArgumentError and reaches no backend") {
    const std::uint64_t before = backend->calls();
    sem::badInputIsRefusedBeforeAnythingIsSent(semaphore, "bad");
    CHECK(backend->calls() == before);
    CHECK(semaphore.inspectSemaphore("bad").capacity == 0);
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "a record and a tombstone last their life on the backend's clock, then are forgotten") {
    REQUIRE(semaphore.acquirePermits("life", sem::kA, 1, 1, 10s, 0ms).acquired);
    REQUIRE(semaphore.releasePermits("life", sem::kA).released);
    clock->advance(2s);  // MemorySemaphores::kRecordLife
    const dlock::ReleaseResult retry = semaphore.releasePermits("life", sem::kA);
    CHECK_FALSE(retry.released);  // the record is gone: no evidence, no "released"
    CHECK(semaphore.acquirePermits("life", sem::kA, 1, 1, 10s, 0ms).acquired);  // nor a refusal
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "injected faults reach the semaphore's calls as the lock's") {
    backend->failNextCalls(1);
    CHECK_THROWS_AS((void)semaphore.acquirePermits("fault", sem::kA, 1, 1, 10s, 0ms), dlock::ConnectionError);
    CHECK(semaphore.inspectSemaphore("fault").capacity == 0);  // nothing happened
    backend->failNextCalls(1);
    const auto results = semaphore.extendPermitsAll({{"fault", sem::kA}}, 10s);
    REQUIRE(results.size() == 1);
    CHECK(results[0].unknown);
  }

  TEST_CASE_FIXTURE(MemorySemaphoreFixture, "forgetLeases forgets the semaphores, as a server restarted empty") {
    REQUIRE(semaphore.acquirePermits("restart", sem::kA, 1, 1, 10s, 0ms).acquired);
    backend->forgetLeases();
    const dlock::SemaphoreInfo info = semaphore.inspectSemaphore("restart");
    CHECK(info.capacity == 0);
    CHECK(info.holders.empty());
    CHECK(semaphore.acquirePermits("restart", sem::kB, 2, 2, 10s, 0ms).acquired);  // a new capacity stored
  }
}
