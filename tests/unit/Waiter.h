// SPDX-License-Identifier: Apache-2.0
// Waiter.h — a wait run on its own thread for the cancellation tests: whether it acquired or
// threw InterruptedError, and when it returned. `unblock`, when set, ends a wait a failed check
// left blocked (a close()), so the test fails instead of hanging in the join.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "Fixtures.h"
#include "dlock/LockError.h"

namespace dlock::test {

struct Waiter {
  std::function<void()> unblock;
  Event returned;
  std::atomic<bool> interrupted{false};
  std::atomic<bool> acquired{false};
  std::chrono::steady_clock::time_point ended;
  std::thread thread;

  template <class Wait>
  explicit Waiter(Wait wait)
      : thread([this, wait] {
          try {
            acquired = wait();
          } catch (const InterruptedError&) {
            interrupted = true;
          } catch (...) {
          }
          ended = std::chrono::steady_clock::now();
          returned.set();
        }) {}
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter() {
    if (unblock && !returned.wait(std::chrono::milliseconds(0))) unblock();
    if (thread.joinable()) thread.join();
  }
  // Milliseconds from `from` to the return (after returned).
  [[nodiscard]] double msSince(std::chrono::steady_clock::time_point from) const {
    return std::chrono::duration<double, std::milli>(ended - from).count();
  }
};

}  // namespace dlock::test
