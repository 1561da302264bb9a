// SPDX-License-Identifier: Apache-2.0
#include "ReadWriteCore.h"

#include <atomic>
#include <utility>

#include "FixedLease.h"
#include "ReadWriteAttempt.h"
#include "ReadWriteRenewer.h"
#include "WaitLoop.h"
#include "WaitPolicy.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

// Two RequestIdHolder ids per read-write lock, above 2^63 so they never meet LockCore's counter.
std::uint64_t nextSideIds() {
  static std::atomic<std::uint64_t> counter{0};
  return (std::uint64_t{1} << 63U) + 2 * counter.fetch_add(1, std::memory_order_relaxed);
}

std::shared_ptr<FairBackend> sideOf(const std::shared_ptr<IOperator>& backend, IReadWriteOperator& rw,
                                    ReadWriteMode mode) {
  auto queue = std::make_shared<ReadWriteQueue>(backend, rw, mode);
  return std::make_shared<FairBackend>(queue, *queue);
}

LeaseKind kindOf(ReadWriteMode mode) { return mode == ReadWriteMode::Read ? LeaseKind::Read : LeaseKind::Write; }

const char* nameOf(LeaseKind kind) { return kind == LeaseKind::Read ? "read" : "write"; }

}  // namespace

ReadWriteCore::ReadWriteCore(std::shared_ptr<IOperator> backend, IReadWriteOperator& rw, std::shared_ptr<Clock> clock,
                             LockOptions options, std::shared_ptr<WatchdogHost> watchdogs)
    : readId_(nextSideIds()),
      backend_(std::move(backend)),
      rw_(rw),
      read_(sideOf(backend_, rw_, ReadWriteMode::Read)),
      write_(sideOf(backend_, rw_, ReadWriteMode::Write)),
      clock_(std::move(clock)),
      waitClock_(waitClockOf(clock_)),
      options_(std::move(options)),
      counters_(std::make_shared<LockCounters>()),
      watchdogs_(std::move(watchdogs)),
      cleanup_([] { return std::make_shared<CleanupLane>(); }),
      holds_(backend_, counters_, [this](const LeaseState& lease) { return side(lease).unlock(lease.key, lease.token); },
             options_.name),
      watchdog_([this] { return makeWatchdog(); }) {}

ReadWriteCore::~ReadWriteCore() {
  watchdog_->stop();
  cleanup_->stop();
}

std::shared_ptr<LeaseState> ReadWriteCore::acquire(ReadWriteMode mode, std::string_view key, Deadline deadline,
                                                   std::optional<milliseconds> leaseTime, const CancelToken& cancel) {
  return acquireAs(mode, key, deadline, leaseTime, cancel, {});
}

FairAcquireResult ReadWriteCore::joinQueue(ReadWriteMode mode, std::string_view key, const std::string& token,
                                           std::optional<milliseconds> leaseTime) {
  if (closed()) throwClosed(std::string(mode == ReadWriteMode::Read ? "read" : "write") + " lock " + quoteKey(key));
  return side(mode).queue().fairLock(key, token, ttlFor(leaseTime), options_.waiterLease);
}

std::unique_ptr<IGrantWatch> ReadWriteCore::watchGrants(ReadWriteMode mode, std::string_view key,
                                                        const std::string& token) {
  return side(mode).queue().watchGrants(key, token);
}

std::shared_ptr<LeaseState> ReadWriteCore::claimGrant(ReadWriteMode mode, std::string_view key, const std::string& token,
                                                      std::uint64_t fencingToken, std::optional<milliseconds> leaseTime) {
  if (closed()) throwClosed(std::string(mode == ReadWriteMode::Read ? "read" : "write") + " lock " + quoteKey(key));
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  // As a sync heir confirms (GrantClaim.h): this mode's hold extended to the ttl, on the server's word.
  const Clock::time_point sentAt = clock_->now();
  if (!side(mode).extend(key, token, ttl)) return nullptr;
  counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
  return holding(key, mode, token, fencingToken, sentAt, ttl, ttl, renewed);
}

std::shared_ptr<LeaseState> ReadWriteCore::takeAs(ReadWriteMode mode, std::string_view key,
                                                  std::optional<milliseconds> leaseTime, const CancelToken& cancel,
                                                  std::string token) {
  return acquireAs(mode, key, WaitPolicy::kTryOnce, leaseTime, cancel, std::move(token));
}

void ReadWriteCore::leaveQueue(ReadWriteMode mode, std::string_view key, const std::string& token,
                               std::optional<milliseconds> leaseTime, CallBudget::TimePoint deadline) noexcept {
  const std::shared_ptr<IOperator> sideBackend = mode == ReadWriteMode::Read ? read_ : write_;
  const AttemptTools tools{sideBackend, *clock_, cleanup_, key, ttlFor(leaseTime)};
  leaveFairQueue(tools, side(mode), token, options_.waiterLease, deadline);
}

std::shared_ptr<LeaseState> ReadWriteCore::acquireAs(ReadWriteMode mode, std::string_view key, Deadline deadline,
                                                     std::optional<milliseconds> leaseTime, const CancelToken& cancel,
                                                     std::string token) {
  if (closed()) throwClosed(std::string(mode == ReadWriteMode::Read ? "read" : "write") + " lock " + quoteKey(key));
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  WaitPolicy policy(deadline, options_.outageTolerance, {cancel, holds_.token()}, waitClock_);
  WaitLoop loop(key, *backend_, *counters_);
  const CountedWait counted(counters_->waiting[static_cast<std::size_t>(kindOf(mode))], !policy.once());
  const std::shared_ptr<IOperator> sideBackend = mode == ReadWriteMode::Read ? read_ : write_;
  const AttemptTools tools{sideBackend, *clock_, cleanup_, key, ttl};
  ReadWriteAttempt attempt(tools, side(mode), mode, policy.once() ? milliseconds(0) : options_.waiterLease,
                           std::move(token));
  const std::optional<Held> held = loop.run(attempt, policy);
  if (!held) return nullptr;
  counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
  return holding(key, mode, attempt.takeToken(), held->fencingToken, held->sentAt, held->validity, ttl, renewed);
}

std::shared_ptr<LeaseState> ReadWriteCore::holding(std::string_view key, ReadWriteMode mode, std::string token,
                                                   std::uint64_t fencingToken, Clock::time_point sentAt,
                                                   milliseconds validity, milliseconds ttl, bool renewed) {
  auto lease = std::make_shared<LeaseState>(std::string(key), std::move(token), fencingToken, ttl, renewed,
                                            sentAt + knownValidity(validity, ttl), kindOf(mode));
  lease->countIn(counters_, 1);
  if (renewed) watchdog_->add(lease);
  const Log log = logger();
  if (log->should_log(spdlog::level::debug)) {
    log->debug("dlock: holding {} (lock {}) on {} ({}, fencing token {})", quoteKey(key), quoteKey(options_.name),
               backend_->describe(), nameOf(lease->kind), fencingToken);
  }
  return lease;
}

LeasePhase ReadWriteCore::beginRelease(LeaseState& lease) {
  if (lease.inheritedAcrossFork()) {
    throw NotOwnerError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() +
                        ": acquired by the parent process before fork(); only the parent can release it");
  }
  // A thread hold only reaches Released here when close() released it under the thread.
  if (lease.phase() == LeasePhase::Released) throwLost(lease, false, "was released when the lock was closed");
  const LeasePhase from = lease.phase();
  if (!lease.transition(from, LeasePhase::Releasing)) {
    // Lost or given up; the hold may still carry our token (its renewals failed): free it if so.
    try {
      (void)side(lease).unlock(lease.key, lease.token);
    } catch (const std::exception&) {
    }
    throwLost(lease, false, "was lost while held");
  }
  return from;
}

template <class Call>
auto ReadWriteCore::releasing(LeaseState& lease, bool valid, LeasePhase from, Call call) {
  try {
    return call();
  } catch (const ConnectionError&) {
    if (!valid) throwLost(lease, true, "had ended, and its release could not reach the server");
    lease.transition(LeasePhase::Releasing, LeasePhase::InDoubt);  // the retry asks the server
    if (lease.renewed) watchdog_->resumeCare();
    throw;
  } catch (...) {
    if (!valid) throwLost(lease, true, "had ended");
    lease.transition(LeasePhase::Releasing, from);  // refused: nothing ran
    if (lease.renewed) watchdog_->resumeCare();
    throw;
  }
}

void ReadWriteCore::settle(LeaseState& lease, bool valid, const ReleaseResult& result) {
  if (!releasedCleanly(result.released, result.releasedEarlier, valid)) {
    throwLost(lease, true, result.released ? "had ended before unlock" : "had expired or was taken");
  }
  lease.transition(LeasePhase::Releasing, LeasePhase::Released);
  const Log log = logger();
  if (log->should_log(spdlog::level::debug)) {
    log->debug("dlock: released the {} hold of {} (lock {}) on {}{}", nameOf(lease.kind), quoteKey(lease.key),
               quoteKey(options_.name), backend_->describe(),
               result.releasedEarlier ? " (by an earlier try whose reply was lost)" : "");
  }
}

void ReadWriteCore::release(LeaseState& lease) {
  const bool valid = lease.unexpiredAt(clock_->now());
  const LeasePhase from = beginRelease(lease);
  const ReleaseResult result = releasing(lease, valid, from, [&] { return side(lease).unlock(lease.key, lease.token); });
  settle(lease, valid, result);
}

std::shared_ptr<LeaseState> ReadWriteCore::downgrade(LeaseState& write) {
  const bool valid = write.unexpiredAt(clock_->now());
  const LeasePhase from = beginRelease(write);
  const Clock::time_point sentAt = clock_->now();
  const bool kept = releasing(write, valid, from, [&] { return rw_.downgrade(write.key, write.token, write.ttl); });
  settle(write, valid, ReleaseResult{kept, 0, false});
  std::shared_ptr<LeaseState> read = holding(write.key, ReadWriteMode::Read, write.token, write.fencingToken, sentAt,
                                             milliseconds(0), write.ttl, write.renewed);
  rekeep(write, read);
  return read;
}

void ReadWriteCore::rekeep(const LeaseState& before, const std::shared_ptr<LeaseState>& now) noexcept {
  holds_.forget(before);
  try {
    holds_.keep(now);
  } catch (const std::exception&) {
  }
}

void ReadWriteCore::extend(LeaseState& lease, milliseconds ttl) { extendFixedLease(lease, side(lease), *clock_, *counters_, ttl); }

milliseconds ReadWriteCore::remaining(const LeaseState& lease) const { return remainingOf(lease, *clock_); }

std::shared_ptr<LeaseState> ReadWriteCore::tryUpgrade(LeaseState& read) {
  if (read.inheritedAcrossFork()) {
    throw NotOwnerError("dlock: tryUpgrade " + quoteKey(read.key) + " on " + backend_->describe() +
                        ": the read hold was acquired by the parent process before fork()");
  }
  const Clock::time_point sentAt = clock_->now();
  FairAcquireResult result;
  try {
    result = rw_.tryUpgrade(read.key, read.token, read.ttl);
  } catch (const ConnectionError&) {
    // It may have run: a write nobody knows of would block the key for its whole ttl. Released
    // if so (best effort; the read hold went with the upgrade, which the watchdog then reports).
    try {
      (void)rw_.releaseWrite(read.key, read.token);
    } catch (const std::exception&) {
    }
    throw;
  }
  if (!result.acquired) return nullptr;
  // The server turned the read hold into the write: finished here without a release of its own.
  if (read.transition(LeasePhase::Held, LeasePhase::Releasing)) read.transition(LeasePhase::Releasing, LeasePhase::Released);
  counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
  std::shared_ptr<LeaseState> write = holding(read.key, ReadWriteMode::Write, read.token, result.fencingToken, sentAt,
                                              result.validity, read.ttl, read.renewed);
  rekeep(read, write);
  return write;
}

bool ReadWriteCore::releaseQuietly(LeaseState& lease) noexcept {
  if (lease.inheritedAcrossFork()) return false;
  try {
    release(lease);
    return true;
  } catch (const LockLostError& error) {
    try {
      logger()->warn("{}", error.what());
    } catch (...) {
    }
  } catch (const std::exception& error) {
    lease.abandon();
    try {
      logger()->warn("dlock: releasing the {} hold of {} (lock {}) failed: {}; the lease ends on its own within {} ms",
                     nameOf(lease.kind), quoteKey(lease.key), quoteKey(options_.name), error.what(), lease.ttl.count());
    } catch (...) {
    }
  } catch (...) {
    lease.abandon();
  }
  return false;
}

void ReadWriteCore::throwLost(LeaseState& lease, bool releasing, const char* what) {
  if (releasing && lease.transition(LeasePhase::Releasing, LeasePhase::Lost)) {
    counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
  }
  throw LockLostError("dlock: unlock " + quoteKey(lease.key) + " (" + nameOf(lease.kind) + ") on " +
                      backend_->describe() + ": the lease " + what + " (fencing token " +
                      std::to_string(lease.fencingToken) + "); the critical section was not protected");
}

std::shared_ptr<Watchdog> ReadWriteCore::makeWatchdog() {
  // Sharing a thread, the round's holds of every kind go together (IRenewalBatch), as LockCore's.
  std::shared_ptr<IRenewalBatch> batch;
  if (watchdogs_) {
    if (auto* renewals = dynamic_cast<IRenewalBatch*>(backend_.get())) batch = std::shared_ptr<IRenewalBatch>(backend_, renewals);
  }
  auto watchdog = std::make_shared<Watchdog>(
      watchdogs_ ? watchdogs_->thread.shared() : std::make_shared<WatchdogThread>(clock_),
      std::make_shared<ReadWriteRenewer>(backend_, rw_), std::move(batch), options_.watchdogLease, counters_,
      options_.name);
  std::lock_guard<ForkSafeMutex> guard(handlerMutex_);
  if (lostHandler_) watchdog->setLostHandler(lostHandler_);
  return watchdog;
}

void ReadWriteCore::setLostHandler(ILock::LostHandler handler) {
  Watchdog& watchdog = *watchdog_;  // first, outside the mutex (a forked child makes it here)
  std::lock_guard<ForkSafeMutex> guard(handlerMutex_);
  lostHandler_ = handler;
  watchdog.setLostHandler(std::move(handler));
}

}  // namespace dlock::detail
