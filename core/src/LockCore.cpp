// SPDX-License-Identifier: Apache-2.0
#include "LockCore.h"

#include <atomic>
#include <utility>

#include "DefaultAttempt.h"
#include "FairAttempt.h"
#include "FixedLease.h"
#include "WaitLoop.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

const CancelToken kNever{};

std::uint64_t nextLockId() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

LockCore::LockCore(std::shared_ptr<IOperator> backend, LockCapabilities capabilities, std::shared_ptr<IWait> wait,
                   std::shared_ptr<Clock> clock, LockOptions options, std::shared_ptr<WatchdogHost> watchdogs)
    : id_(nextLockId()),
      backend_(std::move(backend)),
      capabilities_(std::move(capabilities)),
      wait_(std::move(wait)),
      clock_(std::move(clock)),
      waitClock_(waitClockOf(clock_)),
      options_(std::move(options)),
      log_(logger()),
      counters_(std::make_shared<LockCounters>()),
      watchdogs_(std::move(watchdogs)),
      waiters_([] { return std::make_shared<WaiterQueue>(); }),
      contended_([] { return std::make_shared<ContendedReleases>(); }),
      cleanup_([] { return std::make_shared<CleanupLane>(); }),
      holds_(backend_, counters_, [backend = backend_](const LeaseState& lease) { return backend->unlock(lease.key, lease.token); },
             options_.name),
      watchdog_([this] { return makeWatchdog(); }),
      places_([this] { return makePlaceWatchdog(); }) {}

LockCore::~LockCore() {
  if (places_.shared()) places_->stop();
  watchdog_->stop();
  cleanup_->stop();
}

std::shared_ptr<LeaseState> LockCore::acquire(std::string_view key, Deadline deadline,
                                              std::optional<milliseconds> leaseTime, const CancelToken& cancel) {
  return acquireAs(key, deadline, leaseTime, cancel, {});
}

std::shared_ptr<LeaseState> LockCore::reacquire(std::string_view key, std::optional<milliseconds> leaseTime,
                                                std::string token) {
  return acquireAs(key, Deadline::max(), leaseTime, kNever, std::move(token));
}

FairAcquireResult LockCore::joinFairQueue(std::string_view key, const std::string& token,
                                          std::optional<milliseconds> leaseTime) {
  if (closed()) throwClosed("lock " + quoteKey(key));
  return capabilities_.fair->queue().fairLock(key, token, ttlFor(leaseTime), options_.waiterLease);
}

std::shared_ptr<LeaseState> LockCore::claimGrant(std::string_view key, const std::string& token,
                                                 std::uint64_t fencingToken, std::optional<milliseconds> leaseTime) {
  if (closed()) throwClosed("lock " + quoteKey(key));
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  // As a sync heir confirms its hand-off (GrantClaim.h): the claim extended to the ttl, and only
  // an extend that finds the key this token's makes it the holder.
  const Clock::time_point sentAt = clock_->now();
  if (!backend_->extend(key, token, ttl)) return nullptr;
  return holding(key, token, "fair, async, ", Held{fencingToken, sentAt, ttl}, ttl, renewed);
}

std::shared_ptr<LeaseState> LockCore::takeAs(std::string_view key, std::optional<milliseconds> leaseTime,
                                             const CancelToken& cancel, std::string token) {
  return acquireAs(key, kTryOnce, leaseTime, cancel, std::move(token));
}

void LockCore::leaveFairQueue(std::string_view key, const std::string& token, std::optional<milliseconds> leaseTime,
                              CallBudget::TimePoint deadline) noexcept {
  const AttemptTools tools{backend_, *clock_, cleanup_, key, ttlFor(leaseTime)};
  detail::leaveFairQueue(tools, *capabilities_.fair, token, options_.waiterLease, deadline);
}

std::shared_ptr<LeaseState> LockCore::acquireAs(std::string_view key, Deadline deadline,
                                                std::optional<milliseconds> leaseTime, const CancelToken& cancel,
                                                std::string token) {
  if (closed()) throwClosed("lock " + quoteKey(key));
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  // A ConnectionError inside a wait is retried within the wait's budget; tryLock(key), which
  // tries once, throws at once.
  WaitPolicy policy(deadline, options_.outageTolerance, {cancel, holds_.token()}, waitClock_);
  WaitLoop loop(key, *backend_, *counters_);
  const CountedWait counted(counters_->waiting[static_cast<std::size_t>(LeaseKind::Exclusive)], !policy.once());
  const AttemptTools tools{backend_, *clock_, cleanup_, key, ttl};
  if (capabilities_.fair) {
    FairAttempt attempt(tools, *capabilities_.fair, policy.once() ? milliseconds(0) : options_.waiterLease,
                        std::move(token));
    const std::optional<Held> held = loop.run(attempt, policy);
    return held ? holding(key, attempt, *held, ttl, renewed) : nullptr;
  }
  DefaultAttempt attempt(tools, {*wait_, waiters_, *contended_, capabilities_.ownerRecorder.get(), options_.ownerLabel,
                                 policy.once()});
  const std::optional<Held> held = loop.run(attempt, policy);
  return held ? holding(key, attempt, *held, ttl, renewed) : nullptr;
}

std::shared_ptr<LeaseState> LockCore::acquireBy(std::string_view key, Deadline deadline,
                                                std::optional<milliseconds> leaseTime, LeaseKind kind,
                                                const CancelToken& cancel, const MakeAttempt& make,
                                                std::uint32_t weight) {
  if (closed()) throwClosed("acquire " + quoteKey(key));
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  WaitPolicy policy(deadline, options_.outageTolerance, {cancel, holds_.token()}, waitClock_);
  WaitLoop loop(key, *backend_, *counters_);
  const CountedWait counted(counters_->waiting[static_cast<std::size_t>(kind)], !policy.once());
  const std::unique_ptr<Attempt> attempt = make(AttemptTools{backend_, *clock_, cleanup_, key, ttl}, policy);
  const std::optional<Held> held = loop.run(*attempt, policy);
  return held ? holding(key, *attempt, *held, ttl, renewed, kind, weight) : nullptr;
}

std::optional<Held> LockCore::waitBy(std::string_view key, Deadline deadline, milliseconds ttl,
                                     const CancelToken& cancel, const MakeAttempt& make) {
  WaitPolicy policy(deadline, options_.outageTolerance, {cancel, holds_.token()}, waitClock_);
  WaitLoop loop(key, *backend_, *counters_);
  const std::unique_ptr<Attempt> attempt = make(AttemptTools{backend_, *clock_, cleanup_, key, ttl}, policy);
  return loop.run(*attempt, policy);
}

std::shared_ptr<LeaseState> LockCore::holding(std::string_view key, Attempt& attempt, const Held& held,
                                              milliseconds ttl, bool renewed, LeaseKind kind, std::uint32_t weight) {
  return holding(key, attempt.takeToken(), attempt.kind(), held, ttl, renewed, kind, weight);
}

std::shared_ptr<LeaseState> LockCore::holding(std::string_view key, std::string token, const char* how,
                                              const Held& held, milliseconds ttl, bool renewed, LeaseKind kind,
                                              std::uint32_t weight) {
  counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
  auto lease = std::make_shared<LeaseState>(std::string(key), std::move(token), held.fencingToken, ttl, renewed,
                                            held.sentAt + knownValidity(held.validity, ttl), kind);
  lease->countIn(counters_, weight);
  if (renewed) watchdog_->add(lease);
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("dlock: acquired {} (lock {}) on {} ({}fencing token {})", quoteKey(key), quoteKey(options_.name),
                backend_->describe(), how, held.fencingToken);
  }
  return lease;
}

void LockCore::release(LeaseState& lease) {
  if (lease.inheritedAcrossFork()) throwInherited(lease);
  // A Condition's await gave the key up and close() came before it was taken again: the thread's
  // section ended with the await, nothing is held, nothing to release or report.
  if (lease.phase() == LeasePhase::Yielded) return;
  // A thread hold only reaches Released here when close() released it under the thread.
  if (lease.phase() == LeasePhase::Released) throwLost(lease, false, "was released when the lock was closed");
  // Lost or past its deadline: the section was not protected to the end, unless the server shows
  // that an earlier try of this release ran while the key was ours.
  const bool valid = lease.unexpiredAt(clock_->now());
  const LeasePhase from = lease.phase();
  if (!lease.transition(from, LeasePhase::Releasing)) {
    // Lost (the watchdog told of it first) or given up. The key may still carry our token (its
    // renewals failed): delete it if so, so others need not wait out the TTL. Best effort.
    try {
      (void)backend_->unlock(lease.key, lease.token);
    } catch (const std::exception&) {
    }
    throwLost(lease, false, "was lost while held");
  }
  ReleaseResult result;
  try {
    result = backend_->unlock(lease.key, lease.token);
  } catch (const ConnectionError&) {
    if (!valid) throwLost(lease, true, "had ended, and its release could not reach the server");
    // The release may have run before the connection failed: the next try asks the server.
    lease.transition(LeasePhase::Releasing, LeasePhase::InDoubt);
    if (lease.renewed) watchdog_->resumeCare();
    throw;
  } catch (...) {
    if (!valid) throwLost(lease, true, "had ended");
    // Refused (an error reply): nothing ran. An earlier cut-off try still may have.
    lease.transition(LeasePhase::Releasing, from);
    if (lease.renewed) watchdog_->resumeCare();
    throw;
  }
  if (!releasedCleanly(result.released, result.releasedEarlier, valid)) {
    throwLost(lease, true, result.released ? "had ended before unlock" : "had expired or was taken");
  }
  lease.transition(LeasePhase::Releasing, LeasePhase::Released);
  if (result.notified > 0) contended_->note(lease.key);
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("dlock: released {} (lock {}) on {}{}", quoteKey(lease.key), quoteKey(options_.name),
                backend_->describe(), result.releasedEarlier ? " (by an earlier try whose reply was lost)" : "");
  }
}

void LockCore::throwLost(LeaseState& lease, bool releasing, const char* what) {
  // Counted once per lease: by whoever moved it to Lost (the watchdog, or this release).
  if (releasing && lease.transition(LeasePhase::Releasing, LeasePhase::Lost)) {
    counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
  }
  throw LockLostError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() + ": the lease " +
                      what + " (fencing token " + std::to_string(lease.fencingToken) +
                      "); the critical section was not protected");
}

bool LockCore::releaseQuietly(LeaseState& lease) noexcept {
  if (lease.inheritedAcrossFork()) return false;  // the parent's to release, not ours
  if (lease.phase() == LeasePhase::Yielded) return false;  // nothing held (release() above)
  try {
    release(lease);
    return true;
  } catch (const LockLostError& error) {
    // Nobody hears of it but the log (and stats(), counted already).
    try {
      log_->warn("{}", error.what());
    } catch (...) {
    }
  } catch (const std::exception& error) {
    lease.abandon();
    try {
      log_->warn("dlock: releasing {} failed: {}; the lease ends on its own within {} ms (lock {})", quoteKey(lease.key),
                 error.what(), lease.ttl.count(), quoteKey(options_.name));
    } catch (...) {
    }
  } catch (...) {
    lease.abandon();
  }
  return false;
}

void LockCore::giveUpInDoubt(LeaseState& lease, LeasePhase from, const char* why) noexcept {
  try {
    if (!watchdog_->markLost(lease, from, why)) return;
    // Safe in either order with the script it follows: whichever runs second finds the key not ours.
    cleanup_->post([backend = backend_, log = log_, key = lease.key, token = lease.token] {
      try {
        (void)backend->unlock(key, token);
        return true;
      } catch (const std::exception& error) {
        log->debug("dlock: freeing {} on {} after a call in doubt failed: {}", quoteKey(key), backend->describe(),
                   error.what());
        return false;
      }
    }, "freeing " + quoteKey(lease.key) + " on " + backend_->describe() + " after a call in doubt");
  } catch (const std::exception&) {  // allocation: the lease ends at its TTL
    lease.transition(from, LeasePhase::Lost);
  }
}

void LockCore::throwInherited(const LeaseState& lease) const {
  throw NotOwnerError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() +
                      ": acquired by the parent process before fork(); only the parent can release it");
}

void LockCore::extend(LeaseState& lease, milliseconds ttl) { extendFixedLease(lease, *backend_, *clock_, *counters_, ttl); }

milliseconds LockCore::remaining(const LeaseState& lease) const { return remainingOf(lease, *clock_); }

std::shared_ptr<WatchdogThread> LockCore::watchdogThread() const {
  return watchdogs_ ? watchdogs_->thread.shared() : std::make_shared<WatchdogThread>(clock_);
}

std::shared_ptr<Watchdog> LockCore::makeWatchdog() {
  // Alone, the lock renews as it always did; sharing a thread, every kind of the round goes together.
  auto watchdog = std::make_shared<Watchdog>(watchdogThread(), std::make_shared<ExclusiveRenewer>(backend_),
                                             watchdogs_ ? capabilities_.renewalBatch : nullptr,
                                             options_.watchdogLease, counters_, options_.name);
  // A forked child makes its own watchdog: it reports to the handler the lock was given.
  std::lock_guard<ForkSafeMutex> guard(handlerMutex_);
  if (lostHandler_) watchdog->setLostHandler(lostHandler_);
  return watchdog;
}

std::shared_ptr<Watchdog> LockCore::makePlaceWatchdog() {
  if (!capabilities_.condition) return nullptr;
  // Counters of its own: a place that ends (a signal) is no lease lost nor renewal of the lock's.
  return std::make_shared<Watchdog>(watchdogThread(), std::make_shared<ConditionRenewer>(capabilities_.condition, backend_),
                                    watchdogs_ ? capabilities_.renewalBatch : nullptr, options_.waiterLease,
                                    std::make_shared<LockCounters>(), options_.name + " (condition waiters)");
}

void LockCore::setLostHandler(ILock::LostHandler handler) {
  // First, outside the mutex: a forked child's first use makes its watchdog, which takes it.
  Watchdog& watchdog = *watchdog_;
  std::lock_guard<ForkSafeMutex> guard(handlerMutex_);
  lostHandler_ = handler;
  watchdog.setLostHandler(std::move(handler));
}

}  // namespace dlock::detail
