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
  DLOCK_SEMAPHORE_SCENARIOS(MemorySemaphoreFixture, "")

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
