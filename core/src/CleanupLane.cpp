// SPDX-License-Identifier: Apache-2.0
#include "CleanupLane.h"

#include <utility>

namespace dlock::detail {

void CleanupLane::post(Task task) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!stopping_) {
      tasks_.push_back(std::move(task));
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      wake_.notify_one();
      return;
    }
  }
  (void)task();
}

void CleanupLane::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  wake_.notify_one();
  if (thread.joinable()) thread.join();
}

void CleanupLane::run() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (true) {
    wake_.wait(guard, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, with nothing left
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    guard.unlock();
    (void)task();  // a task that failed again is left to the lease's TTL (it logged why)
    guard.lock();
  }
}

}  // namespace dlock::detail
