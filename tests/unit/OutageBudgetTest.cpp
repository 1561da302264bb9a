// SPDX-License-Identifier: Apache-2.0
// The budget of `dlock`'s wait for riding out an unreachable backend (tools/dlock/OutageBudget.h):
// one for the whole wait, not one per slice.
#include <doctest/doctest.h>

#include <chrono>

#include "tools/dlock/OutageBudget.h"

using namespace std::chrono_literals;
using dlock::cli::OutageBudget;

TEST_SUITE("OutageBudget") {
  const OutageBudget::Clock::time_point start{};  // any instant; the budget only compares time points

  TEST_CASE("a wait with a deadline rides out failures until that deadline, whenever the outage began") {
    OutageBudget budget(start + 5s, 30s);
    CHECK(budget.failedAt(start + 100ms) == start + 5s);
    CHECK(budget.failedAt(start + 4900ms) == start + 5s);
    budget.answered();
    CHECK(budget.failedAt(start + 4990ms) == start + 5s);  // a new outage gets no more than the wait has
    CHECK(budget.failedAt(start + 5s) <= start + 5s);      // at the deadline: spent
  }

  TEST_CASE("a wait without a deadline rides out an outage for the tolerance from its first failure") {
    OutageBudget budget(OutageBudget::kNone, 30s);
    CHECK(budget.failedAt(start + 1s) == start + 31s);
    CHECK(budget.failedAt(start + 20s) == start + 31s);  // later failures of the same outage move nothing
    CHECK(budget.outageAt(start + 20s) == 19s);
    CHECK(budget.failedAt(start + 31s) <= start + 31s);  // spent
  }

  TEST_CASE("an answer ends the outage: the next one of an unbounded wait gets a tolerance of its own") {
    OutageBudget budget(OutageBudget::kNone, 30s);
    CHECK(budget.failedAt(start + 1s) == start + 31s);
    budget.answered();
    CHECK(budget.outageAt(start + 2s) == 0s);
    CHECK(budget.failedAt(start + 40s) == start + 70s);
  }

  TEST_CASE("a zero tolerance ends an unbounded wait at its first failure") {
    OutageBudget budget(OutageBudget::kNone, 0s);
    CHECK(budget.failedAt(start + 1s) <= start + 1s);
  }
}
