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

// What a wait may take beyond its budget: its last attempt and its inline clean-up, each cut to
// CallBudget's floor, and the scheduler's wake-up latency on a loaded two-core machine (measured:
// 5-34 ms over the budget in these tests' runs, sanitizer builds and a concurrent build included).
inline constexpr auto kWaitAllowance = 2 * detail::CallBudget::kLastAttemptFloor + std::chrono::milliseconds(40);

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
