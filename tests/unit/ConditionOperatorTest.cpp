// SPDX-License-Identifier: Apache-2.0
// A lock's conditions on the memory operator and a virtual clock: the cases of
// ConditionScenarios.h (which also run on a real redis-server), and what only memory shows.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ConditionScenarios.h"
#include "dlock/LockError.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
namespace cond = dlock::test::cond;

namespace {

struct MemoryConditionFixture {
  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::shared_ptr<dlock::MemoryOperator> backend = std::make_shared<dlock::MemoryOperator>(clock);
  cond::Backends backends{*backend, *backend, *backend};
  cond::PassTime passTime = [this](std::chrono::milliseconds step) { clock->advance(step); };
  std::function<long long()> calls = [this] { return static_cast<long long>(backend->calls()); };
};

}  // namespace

TEST_SUITE("ConditionOperator") {
  DLOCK_CONDITION_CASES(MemoryConditionFixture, " on memory")

  TEST_CASE_FIXTURE(MemoryConditionFixture, "a failed call changes nothing, and a restart forgets every waiter") {
    REQUIRE(cond::holdThenAwait(backends, "faults", cond::kT1).awaiting);
    REQUIRE(backend->lock("faults", cond::kT2, 10s).acquired);
    backend->failNextCalls(1);
    CHECK_THROWS_AS((void)backend->signal("faults", cond::kName, cond::kT2, dlock::ConditionLock::Exclusive),
                    dlock::ConnectionError);
    CHECK(backend->inspectCondition("faults", cond::kName).waiters.size() == 1);
    backend->forgetLeases();
    CHECK(backend->inspectCondition("faults", cond::kName).waiters.empty());
  }

  TEST_CASE_FIXTURE(MemoryConditionFixture, "a fair key's await leaves no release record for the token's next hold") {
    // The next hold is a hand-off to the same token: if it is lost, its release must say so.
    // A hold longer than the hand-off's claim lease: its release's record would outlive the claim.
    REQUIRE(backend->fairLock("record", cond::kT1, 60s, 0ms).acquired);
    REQUIRE(backend->await("record", cond::kName, cond::kT1, dlock::ConditionLock::Fair, 10s, 10s).awaiting);
    REQUIRE(backend->fairLock("record", cond::kT2, 10s, 0ms).acquired);
    REQUIRE(backend->signal("record", cond::kName, cond::kT2, dlock::ConditionLock::Fair).moved == 1);
    REQUIRE(backend->fairUnlock("record", cond::kT2).notified == 1);
    clock->advance(11s);  // T1's hand-off ends unrenewed
    const dlock::ReleaseResult lost = backend->fairUnlock("record", cond::kT1);
    CHECK_FALSE(lost.released);
    CHECK_FALSE(lost.releasedEarlier);
  }
}
