// SPDX-License-Identifier: Apache-2.0
// FixedHolds.h — the holds gauge's view of fixed-lease holds (no watchdog): a hold whose lease
// ran out unseen ends, as far as this process knows, at its local deadline, not when an unlock or
// extend finds it lost. The gauge counts each hold from acquisition to its final phase
// (LeaseState::countIn, LockCounters::held); this registry keeps the fixed ones, so a read leaves
// out those whose local deadline has passed (the deadline read at that moment: an extend moves it).
// Its mutex is a ForkSafeMutex: a forked child's unlock finds it free.
// Owner: a lock's LockCounters. Thread safety: thread-safe.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "dlock/Clock.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

class FixedHolds {
 public:
  // A hold's deadline as LeaseState keeps it (nanoseconds of the lock's clock).
  using Deadline = std::atomic<Clock::duration::rep>;

  // Counts hold `id` (of gauge `kind`, weighing `weight`) in `gauge` and keeps it until finish().
  template <std::size_t N>
  void start(const void* id, std::size_t kind, std::int64_t weight, const Deadline& deadline,
             std::array<std::atomic<std::int64_t>, N>& gauge) {
    std::lock_guard<ForkSafeMutex> guard(mutex_);
    holds_.push_back(Hold{id, kind, weight, &deadline});
    gauge[kind].fetch_add(weight, std::memory_order_relaxed);
  }

  // Uncounts hold `id` from `gauge` and forgets it; false when it was not kept.
  template <std::size_t N>
  bool finish(const void* id, std::array<std::atomic<std::int64_t>, N>& gauge) {
    std::lock_guard<ForkSafeMutex> guard(mutex_);
    const auto it = std::find_if(holds_.begin(), holds_.end(), [id](const Hold& hold) { return hold.id == id; });
    if (it == holds_.end()) return false;
    gauge[it->kind].fetch_sub(it->weight, std::memory_order_relaxed);
    holds_.erase(it);
    return true;
  }

  // `gauge[kind]` now, without the fixed holds of that kind past their deadline at `now`.
  template <std::size_t N>
  [[nodiscard]] std::uint64_t count(std::size_t kind, Clock::time_point now,
                                    const std::array<std::atomic<std::int64_t>, N>& gauge) const {
    std::lock_guard<ForkSafeMutex> guard(mutex_);
    std::int64_t value = gauge[kind].load(std::memory_order_relaxed);
    const auto nowNanos = now.time_since_epoch().count();
    for (const Hold& hold : holds_) {
      if (hold.kind == kind && hold.deadline->load(std::memory_order_acquire) <= nowNanos) value -= hold.weight;
    }
    return static_cast<std::uint64_t>(std::max<std::int64_t>(0, value));
  }

 private:
  struct Hold {
    const void* id;
    std::size_t kind;
    std::int64_t weight;
    const Deadline* deadline;  // the hold's own: it finishes here before it is destroyed
  };

  mutable ForkSafeMutex mutex_;
  std::vector<Hold> holds_;  // guarded by mutex_
};

}  // namespace dlock::detail
