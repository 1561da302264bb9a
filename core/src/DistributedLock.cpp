// SPDX-License-Identifier: Apache-2.0
#include "DistributedLock.h"

#include <utility>

#include "HeldLease.h"
#include "async/FairAsyncQueue.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/IConditionOperator.h"
#include "dlock/core/Condition.h"
#include "dlock/core/RequestIdHolder.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
DistributedLock::DistributedLock(std::shared_ptr<LockCore> core)
    : core_(std::move(core)),
      async_([this] {
        AsyncAcquirer::Options options;
        options.outageTolerance = core_->options().outageTolerance;
        // A fair lock's async waiters hold places in its queue, as its sync waiters do.
        std::shared_ptr<AsyncQueue> queue;
        if (core_->capabilities().fair) queue = std::make_shared<FairAsyncQueue>(core_);
        return std::make_shared<AsyncAcquirer>(*this, core_->backend(), options, std::move(queue));
      }) {}

bool DistributedLock::doAcquire(std::string_view key, Deadline deadline,
                                std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel) {
  if (RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key)) {
    if (core_->closed()) core_->throwClosed("lock " + quoteKey(key));  // its hold was released at close
    // Reentry must not extend an ended lease: the outer section is already unprotected.
    if (!core_->isValid(*hold->lease)) {
      throw LockLostError("dlock: lock " + quoteKey(key) + " on " + core_->describe() +
                          ": this thread holds the key but its lease has ended; unlock it first");
    }
    ++hold->count;
    core_->counters().reentries.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  std::shared_ptr<LeaseState> lease = core_->acquire(key, deadline, leaseTime, cancel);
  if (!lease) return false;
  core_->keep(lease);
  RequestIdHolder::insert(core_->id(), key, std::move(lease));
  return true;
}

void DistributedLock::throwNotHeld(const char* operation, std::string_view key) const {
  throw NotOwnerError(std::string("dlock: ") + operation + " " + quoteKey(key) + " on " + core_->describe() +
                      ": not held by this thread");
}

void DistributedLock::doUnlock(std::string_view key) {
  RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  if (hold == nullptr) throwNotHeld("unlock", key);
  // An inner hold is only counted down while the lease holds; once it has ended, the release
  // below reports LockLostError and every hold of the key is forgotten.
  if (hold->count > 1 && core_->isValid(*hold->lease)) {
    --hold->count;
    return;
  }
  try {
    core_->release(*hold->lease);
  } catch (const LockLostError&) {
    erase(key, *hold->lease);
    throw;
  }
  // A ConnectionError or BackendError propagated above, keeping the hold for a retry.
  erase(key, *hold->lease);
}

void DistributedLock::erase(std::string_view key, const LeaseState& lease) noexcept {
  core_->forget(lease);
  RequestIdHolder::erase(core_->id(), key);
}

bool DistributedLock::doUnlockQuietly(std::string_view key) noexcept {
  RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  if (hold == nullptr) {
    try {
      logger()->warn("dlock: unlock {}: not held by this thread", quoteKey(key));
    } catch (...) {
    }
    return false;
  }
  if (hold->count > 1 && core_->isValid(*hold->lease)) {
    --hold->count;
    return true;
  }
  const bool released = core_->releaseQuietly(*hold->lease);
  erase(key, *hold->lease);
  return released;
}

bool DistributedLock::doIsHeld(std::string_view key) const {
  const RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  return hold != nullptr && core_->isValid(*hold->lease);
}

unsigned DistributedLock::doHoldCount(std::string_view key) const {
  const RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  return hold == nullptr ? 0 : hold->count;
}

std::uint64_t DistributedLock::doFencingToken(std::string_view key) const {
  const RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  if (hold == nullptr) throwNotHeld("fencingToken", key);
  return hold->lease->fencingToken;
}

void DistributedLock::doExtend(std::string_view key, std::chrono::milliseconds ttl) {
  RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  if (hold == nullptr) throwNotHeld("extend", key);
  core_->extend(*hold->lease, ttl);
}

std::chrono::milliseconds DistributedLock::doRemainingLease(std::string_view key) const {
  const RequestIdHolder::Hold* hold = RequestIdHolder::find(core_->id(), key);
  return hold == nullptr ? std::chrono::milliseconds(0) : core_->remaining(*hold->lease);
}

Lease DistributedLock::doAcquireLease(std::string_view key, Deadline deadline,
                                      std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel) {
  std::shared_ptr<LeaseState> lease = core_->acquire(key, deadline, leaseTime, cancel);
  if (!lease) return Lease();
  return Lease(std::make_unique<HeldLease>(core_, std::move(lease)));
}

Condition DistributedLock::doNewCondition(std::string_view key, std::string_view name) {
  if (!core_->capabilities().condition) {
    throw ConfigError("dlock: newCondition " + quoteKey(key) + ": " + core_->capabilities().conditionUnsupported);
  }
  if (name.empty() || name.size() > kMaxConditionNameBytes) {
    throw InvalidArgumentError("dlock: newCondition " + quoteKey(key) + ": the condition name " + quoteText(name, 40) +
                               " has " + std::to_string(name.size()) + " bytes, not 1 to " +
                               std::to_string(kMaxConditionNameBytes));
  }
  return Condition(core_, std::string(key), std::string(name));
}

void DistributedLock::doOnLockLost(LostHandler handler) { core_->setLostHandler(std::move(handler)); }

LockStats DistributedLock::doStats() const {
  LockStats stats = core_->stats();
  stats.name = core_->options().name;
  const LockCounters& counters = core_->counters();
  stats.holds = counters.heldAt(static_cast<std::size_t>(LeaseKind::Exclusive), core_->now());
  stats.waiting = LockCounters::gauge(counters.waiting[static_cast<std::size_t>(LeaseKind::Exclusive)]);
  return stats;
}

const std::string& DistributedLock::doDefaultKey() const noexcept { return core_->options().defaultKey; }

}  // namespace dlock::detail
