// SPDX-License-Identifier: Apache-2.0
// ContendedReleases.h — fairness of the default lock: after a release of ours that reached
// waiters, this process holds back from the key for about four round trips (the release message
// reaches a waiter, its acquire reaches the server; two more for a woken process that waits for a
// CPU: at two, the slowest waits of bench/handoff were mostly overtaken by releasers barging back
// in), so a waiter can take it instead. The round trip is a smoothed sample of acquire attempts.
// And the keys this process waited for lately (recent()), whose next acquisition listens before
// its first try.
// Owner: one LockCore (a forked child gets its own: a parent's thread may have held the mutex).
// Thread safety: thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "RecentContention.h"

namespace dlock::detail {

class ContendedReleases {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  // One acquire attempt in this many is timed: two clock reads are a tenth of the memory
  // backend's cycle.
  static constexpr std::uint64_t kRoundTripSampling = 8;

  void sampleRoundTrip(std::chrono::nanoseconds took) noexcept {
    const std::int64_t previous = roundTripNanos_.load(std::memory_order_relaxed);
    roundTripNanos_.store(previous == 0 ? took.count() : (previous * 3 + took.count()) / 4, std::memory_order_relaxed);
  }

  // A release of `key` reached waiters.
  void note(std::string_view key) {
    const auto roundTrip = std::chrono::nanoseconds(roundTripNanos_.load(std::memory_order_relaxed));
    const auto window = std::clamp<std::chrono::nanoseconds>(4 * roundTrip, std::chrono::microseconds(50),
                                                             std::chrono::milliseconds(5));
    const SteadyTime now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> guard(mutex_);
    if (until_.size() > 1024) {
      for (auto it = until_.begin(); it != until_.end();) it = it->second <= now ? until_.erase(it) : std::next(it);
    }
    const auto it = until_.find(key);
    if (it == until_.end()) {
      until_.emplace(std::string(key), now + window);
    } else {
      it->second = now + window;
    }
    pending_.store(until_.size(), std::memory_order_release);
  }

  // Until when an acquisition of `key` holds back, once; nullopt when it need not.
  [[nodiscard]] std::optional<SteadyTime> take(std::string_view key) {
    if (pending_.load(std::memory_order_acquire) == 0) return std::nullopt;  // the uncontended path
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = until_.find(key);
    if (it == until_.end()) return std::nullopt;
    const SteadyTime until = it->second;
    until_.erase(it);
    pending_.store(until_.size(), std::memory_order_release);
    return until;
  }

  [[nodiscard]] RecentContention& recent() noexcept { return recent_; }

 private:
  RecentContention recent_;
  std::atomic<std::int64_t> roundTripNanos_{0};  // smoothed duration of a sampled acquire attempt
  std::atomic<std::size_t> pending_{0};          // until_.size(), readable without the mutex
  std::mutex mutex_;
  std::map<std::string, SteadyTime, std::less<>> until_;  // guarded by mutex_
};

}  // namespace dlock::detail
