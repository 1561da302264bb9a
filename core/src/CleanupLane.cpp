// SPDX-License-Identifier: Apache-2.0
#include "CleanupLane.h"

#include <algorithm>
#include <utility>

#include "dlock/detail/Log.h"

namespace dlock::detail {

void CleanupLane::runWithin(CallBudget::TimePoint deadline, Task task, std::string what) {
  // Now, within what is left of the wait's budget (at the least CallBudget's floor: a healthy
  // server answers well within it), so that the caller returns with the queue left, the key free.
  {
    const CallBudget budget(deadline);
    if (task()) return;
  }
  // Failed, for want of time perhaps (a hung or slow server, a cancelled wait): again on the lane,
  // with the backend's own timeouts, so that the caller is not held past its deadline.
  post(std::move(task), std::move(what));
}

void CleanupLane::post(Task task, std::string what) {
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!stopping_) {
      tasks_.push_back(Pending{std::move(task), std::move(what), now, now});
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      wake_.notify_one();
      return;
    }
  }
  Pending pending{std::move(task), std::move(what), now, now};
  (void)runOnce(pending, true);
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

bool CleanupLane::runOnce(Pending& pending, bool last) noexcept {
  // No budget: a backend in its reconnect back-off fails the run at once (its callers, not the
  // lane, are owed its connections), and the lane's own back-off brings the next run after it.
  if (pending.task()) return true;
  const auto now = Clock::now();
  if (!last && now - pending.postedAt < kGiveUpAfter) {
    pending.dueAt = now + pending.backoff;
    pending.backoff = std::min(pending.backoff * 2, std::chrono::milliseconds(1000));
    return false;
  }
  try {
    logger()->warn("dlock: {} still failed after {} s; given up, what it was to free ends with its lease", pending.what,
                   std::chrono::duration_cast<std::chrono::seconds>(now - pending.postedAt).count());
  } catch (...) {
  }
  return true;
}

void CleanupLane::run() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (true) {
    if (tasks_.empty()) {
      if (stopping_) return;
      wake_.wait(guard);
      continue;
    }
    // The task due first; a retry's back-off does not hold up the tasks behind it.
    const auto next = std::min_element(tasks_.begin(), tasks_.end(),
                                       [](const Pending& a, const Pending& b) { return a.dueAt < b.dueAt; });
    if (!stopping_ && next->dueAt > Clock::now()) {
      wake_.wait_until(guard, next->dueAt);
      continue;
    }
    Pending pending = std::move(*next);
    tasks_.erase(next);
    const bool last = stopping_;
    guard.unlock();
    const bool done = runOnce(pending, last);
    guard.lock();
    if (!done) tasks_.push_back(std::move(pending));
  }
}

}  // namespace dlock::detail
