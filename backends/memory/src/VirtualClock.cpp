// SPDX-License-Identifier: Apache-2.0
#include "dlock/memory/VirtualClock.h"

namespace dlock {

VirtualClock::VirtualClock() : now_(time_point(std::chrono::hours(1))) {}

VirtualClock::time_point VirtualClock::now() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return now_;
}

void VirtualClock::waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    // Something is due: return so the caller runs it; it is settled when it comes back to wait.
    if (now_ >= deadline) return;
    waiters_[std::this_thread::get_id()] = epoch_;
  }
  settled_.notify_all();
  // Virtual time cannot wake a condition variable, so poll in short real-time naps; the
  // caller's own notify (a new lease, a stop) still wakes it at once.
  cv.wait_for(lock, std::chrono::milliseconds(1));
}

void VirtualClock::forgetWaiter() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    waiters_.erase(std::this_thread::get_id());
  }
  settled_.notify_all();
}

void VirtualClock::advance(std::chrono::nanoseconds step) {
  std::unique_lock<std::mutex> guard(mutex_);
  now_ += std::chrono::duration_cast<duration>(step);
  const unsigned long long target = ++epoch_;
  settled_.wait_for(guard, std::chrono::seconds(5), [&] {
    for (const auto& [thread, seen] : waiters_) {
      if (seen < target) return false;
    }
    return true;
  });
}

}  // namespace dlock
