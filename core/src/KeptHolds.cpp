// SPDX-License-Identifier: Apache-2.0
#include "KeptHolds.h"

#include <utility>
#include <vector>

#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock::detail {

KeptHolds::KeptHolds(std::shared_ptr<IOperator> backend, std::shared_ptr<LockCounters> counters, Unlock unlock,
                     const std::string& lockName)
    : backend_(std::move(backend)),
      counters_(std::move(counters)),
      unlock_(std::move(unlock)),
      lockName_(quoteKey(lockName)),
      log_(logger()),
      closingToken_(closing_.token()) {}

void KeptHolds::keep(const std::shared_ptr<LeaseState>& lease) {
  {
    std::lock_guard<ForkSafeMutex> guard(mutex_);
    if (!closed()) {
      kept_.emplace(lease.get(), lease);
      return;
    }
  }
  releaseAtClose(*lease);  // closed as it was acquired: not kept past close()
  throwClosed("lock " + quoteKey(lease->key));
}

void KeptHolds::forget(const LeaseState& lease) noexcept {
  std::lock_guard<ForkSafeMutex> guard(mutex_);
  kept_.erase(&lease);
}

void KeptHolds::throwClosed(const std::string& what) const {
  throw InterruptedError("dlock: " + what + " on " + backend_->describe() + ": the lock was closed; nothing is held");
}

void KeptHolds::close() noexcept {
  closing_.requestCancel();  // wakes every wait of the lock; a later one is refused before it sends
  std::vector<std::shared_ptr<LeaseState>> held;
  {
    std::lock_guard<ForkSafeMutex> guard(mutex_);  // no network under it: copied out first
    for (auto& [state, kept] : kept_) {
      if (auto lease = kept.lock()) held.push_back(std::move(lease));
    }
    kept_.clear();
  }
  for (const auto& lease : held) releaseAtClose(*lease);
}

void KeptHolds::releaseAtClose(LeaseState& lease) noexcept {
  // A parent's hold (after fork) is the parent's to release; a finished one needs nothing.
  if (lease.inheritedAcrossFork() || !lease.transition(LeasePhase::Held, LeasePhase::Releasing)) return;
  try {
    const ReleaseResult result = unlock_(lease);
    if (result.released) {
      lease.transition(LeasePhase::Releasing, LeasePhase::Released);
      log_->info("dlock: released {} on {} at close (lock {})", quoteKey(lease.key), backend_->describe(), lockName_);
    } else {
      if (lease.transition(LeasePhase::Releasing, LeasePhase::Lost)) {
        counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
      }
      log_->warn("dlock: {} on {} had been lost before close (fencing token {}; lock {})", quoteKey(lease.key),
                 backend_->describe(), lease.fencingToken, lockName_);
    }
  } catch (const std::exception& error) {
    lease.transition(LeasePhase::Releasing, LeasePhase::InDoubt);
    lease.abandon();
    try {
      log_->warn("dlock: releasing {} at close failed: {}; the lease ends on its own within {} ms (lock {})",
                 quoteKey(lease.key), error.what(), lease.ttl.count(), lockName_);
    } catch (...) {
    }
  }
}

}  // namespace dlock::detail
