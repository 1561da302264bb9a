// SPDX-License-Identifier: Apache-2.0
// Eventually.h — waits for the event a test means: `done()` polled every millisecond until it
// holds (true) or `budget` of real time passed (false), a bound no healthy run comes near.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace dlock::test {

inline bool eventually(const std::function<bool()>& done,
                       std::chrono::milliseconds budget = std::chrono::seconds(30)) {
  const auto until = std::chrono::steady_clock::now() + budget;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

}  // namespace dlock::test
