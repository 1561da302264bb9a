// SPDX-License-Identifier: Apache-2.0
#include "RedlockWatch.h"

#include <algorithm>
#include <utility>

#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

RedlockWatch::RedlockWatch(std::vector<std::unique_ptr<IReleaseWatch>> members) : members_(std::move(members)) {}

bool RedlockWatch::waitForRelease(std::chrono::milliseconds timeout) {
  using Steady = std::chrono::steady_clock;
  const Steady::time_point deadline = Steady::now() + std::max(timeout, std::chrono::milliseconds(0));
  while (true) {
    // A release already seen by any member counts at once.
    bool seen = false;
    for (auto& member : members_) seen = member->waitForRelease(std::chrono::milliseconds(0)) || seen;
    if (seen) return true;  // every member consulted: one release shows on several nodes
    const Steady::time_point now = Steady::now();
    if (now >= deadline || Wakeup::woken()) return false;  // woken: the wait was cancelled
    const auto slice = std::min(kSlice, std::chrono::ceil<std::chrono::milliseconds>(deadline - now));
    IReleaseWatch& member = *members_[next_];
    next_ = (next_ + 1) % members_.size();
    if (member.waitForRelease(slice)) {
      for (auto& other : members_) (void)other->waitForRelease(std::chrono::milliseconds(0));
      return true;
    }
  }
}

bool RedlockWatch::notifyOnRelease(std::function<void()> heard) {
  if (!heard) return false;
  bool all = true;
  for (auto& member : members_) all = member->notifyOnRelease(heard) && all;
  return all;
}

}  // namespace dlock::detail
