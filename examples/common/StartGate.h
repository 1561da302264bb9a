// SPDX-License-Identifier: Apache-2.0
// StartGate.h — releases a group of threads at the same moment, once all have arrived, so the
// examples' concurrent requests really overlap. Single use. Thread safety: thread-safe.
#pragma once

#include <condition_variable>
#include <mutex>

namespace examples {

class StartGate {
 public:
  explicit StartGate(int parties) : waiting_(parties) {}
  StartGate(const StartGate&) = delete;
  StartGate& operator=(const StartGate&) = delete;

  // Blocks until `parties` threads have called it.
  void arriveAndWait() {
    std::unique_lock<std::mutex> guard(mutex_);
    if (--waiting_ == 0) opened_.notify_all();
    opened_.wait(guard, [this] { return waiting_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable opened_;
  int waiting_;  // guarded by mutex_
};

}  // namespace examples
