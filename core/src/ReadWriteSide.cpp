// SPDX-License-Identifier: Apache-2.0
#include "ReadWriteSide.h"

#include <utility>

#include "HeldLease.h"
#include "async/ReadWriteAsyncQueue.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Condition.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

ReadWriteMode otherMode(ReadWriteMode mode) {
  return mode == ReadWriteMode::Read ? ReadWriteMode::Write : ReadWriteMode::Read;
}

}  // namespace

ReadWriteSide::ReadWriteSide(std::shared_ptr<ReadWriteOwners> owners, ReadWriteMode mode)
    : owners_(std::move(owners)),
      core_(owners_->core),
      mode_(mode),
      name_(mode == ReadWriteMode::Read ? "read" : "write"),
      async_([this] {
        AsyncAcquirer::Options options;
        options.outageTolerance = core_->options().outageTolerance;
        return std::make_shared<AsyncAcquirer>(*this, core_->backend(), options,
                                               std::make_shared<ReadWriteAsyncQueue>(core_, mode_));
      }) {}

RequestIdHolder::Hold* ReadWriteSide::own(std::string_view key) const {
  return RequestIdHolder::find(core_->sideId(mode_), key);
}

RequestIdHolder::Hold* ReadWriteSide::other(std::string_view key) const {
  return RequestIdHolder::find(core_->sideId(otherMode(mode_)), key);
}

void ReadWriteSide::reenter(RequestIdHolder::Hold& hold, std::string_view key) {
  if (core_->closed()) core_->throwClosed(std::string(name_) + " lock " + quoteKey(key));  // released at close
  // Reentry must not extend an ended lease: the outer section is already unprotected.
  if (!core_->isValid(*hold.lease)) throwEnded("lock", key);
  ++hold.count;
  core_->counters().reentries.fetch_add(1, std::memory_order_relaxed);
}

bool ReadWriteSide::doAcquire(std::string_view key, Deadline deadline,
                              std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel) {
  if (RequestIdHolder::Hold* hold = own(key)) {
    reenter(*hold, key);
    return true;
  }
  if (RequestIdHolder::Hold* held = other(key)) {
    if (mode_ == ReadWriteMode::Write) {
      // It would wait for this thread's own read hold for ever (ReentrantReadWriteLock hangs there).
      throw UpgradeError("dlock: lock " + quoteKey(key) + " (write) on " + core_->describe() +
                         ": this thread holds the read lock; release it first, or use tryUpgrade");
    }
    // The writer reads too: a read hold carried by its write, at once.
    if (core_->closed()) core_->throwClosed(std::string(name_) + " lock " + quoteKey(key));
    if (!core_->isValid(*held->lease)) throwEnded("lock", key);
    RequestIdHolder::insert(core_->sideId(mode_), key, held->lease);
    core_->counters().reentries.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  std::shared_ptr<LeaseState> lease = core_->acquire(mode_, key, deadline, leaseTime, cancel);
  if (!lease) return false;
  core_->keep(lease);
  RequestIdHolder::insert(core_->sideId(mode_), key, std::move(lease));
  return true;
}

void ReadWriteSide::releaseLast(RequestIdHolder::Hold& hold, std::string_view key) {
  const std::uint64_t id = core_->sideId(mode_);
  if (mode_ == ReadWriteMode::Read && carried(hold)) {
    // Nothing of its own on the server: the write still holds (or ended, which says so).
    const bool valid = core_->isValid(*hold.lease);
    RequestIdHolder::erase(id, key);
    if (!valid) throwEnded("unlock", key);
    return;
  }
  RequestIdHolder::Hold* read = mode_ == ReadWriteMode::Write ? other(key) : nullptr;
  try {
    if (read != nullptr && read->lease == hold.lease) {
      read->lease = core_->downgrade(*hold.lease);
    } else {
      core_->release(*hold.lease);
    }
  } catch (const LockLostError&) {
    erase(key, hold);  // a carried read hold keeps the lost lease: it ended too
    throw;
  }
  // A ConnectionError or BackendError propagated above, keeping the hold for a retry.
  erase(key, hold);
}

void ReadWriteSide::erase(std::string_view key, const RequestIdHolder::Hold& hold) noexcept {
  // A read hold carried by the write leaves the write kept (the write side forgets it).
  if (!(mode_ == ReadWriteMode::Read && carried(hold))) core_->forget(*hold.lease);
  RequestIdHolder::erase(core_->sideId(mode_), key);
}

void ReadWriteSide::doUnlock(std::string_view key) {
  RequestIdHolder::Hold* hold = own(key);
  if (hold == nullptr) throwNotHeld("unlock", key);
  if (hold->count > 1 && core_->isValid(*hold->lease)) {
    --hold->count;
    return;
  }
  releaseLast(*hold, key);
}

bool ReadWriteSide::doUnlockQuietly(std::string_view key) noexcept {
  try {
    doUnlock(key);
    return true;
  } catch (const std::exception& error) {
    try {
      logger()->warn("{}", error.what());
    } catch (...) {
    }
  } catch (...) {
  }
  // Failed: forget the hold; a lease of its own is no longer renewed and ends at its TTL.
  try {
    if (RequestIdHolder::Hold* hold = own(key)) {
      if (!(mode_ == ReadWriteMode::Read && carried(*hold))) hold->lease->abandon();
      erase(key, *hold);
    }
  } catch (...) {
  }
  return false;
}

bool ReadWriteSide::doIsHeld(std::string_view key) const {
  const RequestIdHolder::Hold* hold = own(key);
  return hold != nullptr && core_->isValid(*hold->lease);
}

unsigned ReadWriteSide::doHoldCount(std::string_view key) const {
  const RequestIdHolder::Hold* hold = own(key);
  return hold == nullptr ? 0 : hold->count;
}

std::uint64_t ReadWriteSide::doFencingToken(std::string_view key) const {
  const RequestIdHolder::Hold* hold = own(key);
  if (hold == nullptr) throwNotHeld("fencingToken", key);
  return hold->lease->fencingToken;
}

Lease ReadWriteSide::doAcquireLease(std::string_view key, Deadline deadline,
                                    std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel) {
  std::shared_ptr<LeaseState> lease = core_->acquire(mode_, key, deadline, leaseTime, cancel);
  if (!lease) return Lease();
  return Lease(std::make_unique<CoreLease<ReadWriteCore>>(core_, std::move(lease)));
}

void ReadWriteSide::doExtend(std::string_view key, std::chrono::milliseconds ttl) {
  RequestIdHolder::Hold* hold = own(key);
  if (hold == nullptr) throwNotHeld("extend", key);
  if (mode_ == ReadWriteMode::Read && carried(*hold)) {
    throw InvalidArgumentError("dlock: extend " + quoteKey(key) + " (read) on " + core_->describe() +
                               ": the read hold is carried by this thread's write hold; extend the write");
  }
  core_->extend(*hold->lease, ttl);
}

std::chrono::milliseconds ReadWriteSide::doRemainingLease(std::string_view key) const {
  const RequestIdHolder::Hold* hold = own(key);
  return hold == nullptr ? std::chrono::milliseconds(0) : core_->remaining(*hold->lease);
}

Condition ReadWriteSide::doNewCondition(std::string_view key, std::string_view /*name*/) {
  throw ConfigError(std::string("dlock: newCondition ") + quoteKey(key) + ": the " + name_ +
                    " side of a read-write lock keeps no conditions; use a lock from LockBuilder::build()");
}

void ReadWriteSide::doOnLockLost(LostHandler handler) { core_->setLostHandler(std::move(handler)); }

LockStats ReadWriteSide::doStats() const {
  LockStats stats = core_->stats();
  stats.name = core_->options().name;
  stats.kind = StatsKind::ReadWrite;
  const LockCounters& counters = core_->counters();
  const Clock::time_point now = core_->now();
  stats.holds = counters.heldAt(static_cast<std::size_t>(LeaseKind::Write), now);
  stats.waiting = LockCounters::gauge(counters.waiting[static_cast<std::size_t>(LeaseKind::Write)]);
  stats.readHolds = counters.heldAt(static_cast<std::size_t>(LeaseKind::Read), now);
  stats.readWaiting = LockCounters::gauge(counters.waiting[static_cast<std::size_t>(LeaseKind::Read)]);
  return stats;
}

const std::string& ReadWriteSide::doDefaultKey() const noexcept { return core_->options().defaultKey; }

void ReadWriteSide::throwNotHeld(const char* operation, std::string_view key) const {
  throw NotOwnerError(std::string("dlock: ") + operation + " " + quoteKey(key) + " (" + name_ + ") on " +
                      core_->describe() + ": not held by this thread");
}

void ReadWriteSide::throwEnded(const char* operation, std::string_view key) const {
  throw LockLostError(std::string("dlock: ") + operation + " " + quoteKey(key) + " (" + name_ + ") on " +
                      core_->describe() + ": this thread's lease has ended; the critical section was not protected");
}

}  // namespace dlock::detail
