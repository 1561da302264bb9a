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
}
