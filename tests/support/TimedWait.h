// SPDX-License-Identifier: Apache-2.0
// TimedWait.h — measuring a wait against its budget (WaitBudgetTest, WaitBudgetTopologyTest).
//   kWaitAllowance   what a wait may take beyond its budget
//   timed(wait)      how long `wait` took, and whether it ended with a ConnectionError
#pragma once

#include <chrono>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/detail/CallBudget.h"

namespace dlock::test {

// What a wait may take beyond its budget: the server-side close of its timed-out connection, its
// inline clean-up and that clean-up's own close, each cut to CallBudget's floor, and the
// scheduler's wake-up latency on a loaded two-core machine. Measured over the budget: 0-42 ms in
// the normal and ASan builds, 52 ms once in the TSan build with a fault-test run beside it.
inline constexpr auto kWaitAllowance = 3 * detail::CallBudget::kLastAttemptFloor + std::chrono::milliseconds(60);

template <class Wait>
std::pair<std::chrono::milliseconds, bool> timed(Wait&& wait) {
  const auto start = std::chrono::steady_clock::now();
  bool threw = false;
  try {
    wait();
  } catch (const ConnectionError&) {
    threw = true;
  }
  return {std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start), threw};
}

}  // namespace dlock::test
