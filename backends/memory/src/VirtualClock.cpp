// SPDX-License-Identifier: Apache-2.0
#include "dlock/memory/VirtualClock.h"

#include <algorithm>
#include <vector>

namespace dlock {

VirtualClock::VirtualClock() : now_(time_point(std::chrono::hours(1))) {}

VirtualClock::time_point VirtualClock::now() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return now_;
}

void VirtualClock::waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) {
  const std::thread::id self = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    Waiter& waiter = waiters_[self];
    // Due: the caller runs it, and is settled when it comes back to sleep (or leaves).
    if (now_ >= deadline) return;
    waiter.cv = &cv;
    waiter.mutex = lock.mutex();
    waiter.deadline = deadline;
    waiter.asleep = true;
  }
  changed_.notify_all();
  // `lock` was held from before the registration: advance() notifies under it, so its notify
  // cannot fall between the registration and this wait.
  cv.wait(lock);
  std::unique_lock<std::mutex> guard(mutex_);
  Waiter& waiter = waiters_[self];
  if (waiter.notifying > 0) {
    // advance() holds pointers to cv and to `lock`'s mutex, and needs that mutex to notify.
    lock.unlock();
    changed_.wait(guard, [&] { return waiter.notifying == 0; });
    waiter.asleep = false;
    guard.unlock();
    changed_.notify_all();
    lock.lock();
    return;
  }
  waiter.asleep = false;
  guard.unlock();
  changed_.notify_all();
}

void VirtualClock::forgetWaiter() {
  {
    std::unique_lock<std::mutex> guard(mutex_);
    const auto it = waiters_.find(std::this_thread::get_id());
    if (it == waiters_.end()) return;
    waiters_.erase(it);
  }
  changed_.notify_all();
}

bool VirtualClock::settled() const {
  return std::all_of(waiters_.begin(), waiters_.end(), [this](const auto& entry) {
    const Waiter& waiter = entry.second;
    return waiter.asleep && waiter.notifying == 0 && waiter.deadline > now_;
  });
}

void VirtualClock::advance(std::chrono::nanoseconds step) {
  struct Due {
    std::thread::id thread;
    std::condition_variable* cv;
    std::mutex* mutex;
  };
  std::vector<Due> due;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    now_ += std::chrono::duration_cast<duration>(step);
    for (auto& [thread, waiter] : waiters_) {
      if (!waiter.asleep || waiter.deadline > now_) continue;
      ++waiter.notifying;  // pins cv: the sleeper waits for this notify before it goes
      due.push_back({thread, waiter.cv, waiter.mutex});
    }
  }
  // Each under the sleeper's own mutex, outside ours (the sleeper takes ours while holding its own).
  for (const Due& sleeper : due) {
    std::lock_guard<std::mutex> guard(*sleeper.mutex);
    sleeper.cv->notify_all();
  }
  std::unique_lock<std::mutex> guard(mutex_);
  for (const Due& sleeper : due) --waiters_.at(sleeper.thread).notifying;
  changed_.notify_all();
  changed_.wait_for(guard, std::chrono::seconds(5), [this] { return settled(); });
}

std::size_t VirtualClock::sleepers() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return static_cast<std::size_t>(
      std::count_if(waiters_.begin(), waiters_.end(), [](const auto& entry) { return entry.second.asleep; }));
}

bool VirtualClock::awaitSleepers(std::size_t count, std::chrono::milliseconds budget) const {
  std::unique_lock<std::mutex> guard(mutex_);
  return changed_.wait_for(guard, budget, [&] {
    return static_cast<std::size_t>(std::count_if(waiters_.begin(), waiters_.end(),
                                                  [](const auto& entry) { return entry.second.asleep; })) >= count;
  });
}

}  // namespace dlock
