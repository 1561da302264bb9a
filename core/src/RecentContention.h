// SPDX-License-Identifier: Apache-2.0
// RecentContention.h — the keys this process waited for lately: the next acquisition of such a key
// listens for its hand-off (the fair lock) or its wake-up (the default lock) before its first
// attempt (the subscription is most likely still there, lingering), so it needs no second attempt
// after subscribing, and a contended hand-off costs two commands: the waiter's attempt and the
// holder's release (the default lock: and the woken waiter's try).
// Owner: one FairBackend, or one ContendedReleases (a forked child gets its own, through ForkLocal).
// Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace dlock::detail {

class RecentContention {
 public:
  using Time = std::chrono::steady_clock::time_point;

  // How long a wait counts as lately: the release subscriber's linger (SubscriberOptions).
  static constexpr std::chrono::seconds kMemory{5};
  // Keys remembered at most; past it, the stale ones go.
  static constexpr std::size_t kCapacity = 1024;

  void note(std::string_view key, Time now = std::chrono::steady_clock::now()) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (keys_.size() >= kCapacity) {
      for (auto it = keys_.begin(); it != keys_.end();) it = now - it->second > kMemory ? keys_.erase(it) : std::next(it);
      if (keys_.size() >= kCapacity) keys_.erase(keys_.begin());
    }
    const auto it = keys_.find(key);
    if (it == keys_.end()) {
      keys_.emplace(std::string(key), now);
    } else {
      it->second = now;
    }
  }

  [[nodiscard]] bool lately(std::string_view key, Time now = std::chrono::steady_clock::now()) const {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = keys_.find(key);
    return it != keys_.end() && now - it->second <= kMemory;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Time, std::less<>> keys_;  // guarded by mutex_: when this process last waited
};

}  // namespace dlock::detail
