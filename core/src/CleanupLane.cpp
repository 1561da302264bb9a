// SPDX-License-Identifier: Apache-2.0
#include "CleanupLane.h"

#include <utility>

namespace dlock::detail {

void CleanupLane::runWithin(CallBudget::TimePoint deadline, Task task) {
  // Now, within what is left of the wait's budget (at the least CallBudget's floor: a healthy
  // server answers well within it), so that the caller returns with the queue left, the key free.
  {
    const CallBudget budget(deadline);
    if (task()) return;
  }
  // Failed, for want of time perhaps (a hung or slow server): once more, with the backend's own
  // timeouts, on the lane, so that the caller is not held past its deadline.
  post(std::move(task));
}

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
