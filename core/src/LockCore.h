// SPDX-License-Identifier: Apache-2.0
// LockCore.h — the acquire/release algorithm shared by thread holds (DistributedLock) and Lease
// handles. Kept alive by the lock and by every Lease it handed out, so a Lease may outlive its
// lock; the last of them may be dropped by a lost handler, on the watchdog's thread (see
// Watchdog.h). close() ends its waits and releases the thread holds it keeps (keep()); Leases are
// their holders'. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>

#include "Attempt.h"
#include "CleanupLane.h"
#include "ContendedReleases.h"
#include "KeptHolds.h"
#include "LeaseState.h"
#include "LockCapabilities.h"
#include "LockCounters.h"
#include "WaitPolicy.h"
#include "WaiterQueue.h"
#include "Watchdog.h"
#include "WatchdogHost.h"
#include "dlock/Cancel.h"
#include "dlock/Clock.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/IWait.h"
#include "dlock/LockOptions.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

class LockCore {
 public:
  using Deadline = ILock::Deadline;
  static constexpr Deadline kTryOnce = WaitPolicy::kTryOnce;

  // `capabilities`: what LockBuilder::build found the backend offers and the options ask for.
  // `watchdogs`: the watchdog thread shared with other primitives (on `clock`); null: its own.
  LockCore(std::shared_ptr<IOperator> backend, LockCapabilities capabilities, std::shared_ptr<IWait> wait,
           std::shared_ptr<Clock> clock, LockOptions options, std::shared_ptr<WatchdogHost> watchdogs = nullptr);
  LockCore(const LockCore&) = delete;
  LockCore& operator=(const LockCore&) = delete;
  ~LockCore();

  // Acquires `key` for a new token, waiting until `deadline` (the wait loop, WaitLoop.h, over the
  // lock's attempt); nullptr on timeout. Throws what the backend throws, or InterruptedError
  // (`cancel`, or close(): before or during the wait); then nothing is held.
  std::shared_ptr<LeaseState> acquire(std::string_view key, Deadline deadline,
                                      std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel);

  // The key taken again after a Condition's wait (Condition.cpp): the lock's own attempt with no
  // deadline, ended only by close() (InterruptedError). `token`: the signalled fair waiter's, whose
  // place in the queue it is; empty for a new one. `leaseTime` as the hold given up.
  std::shared_ptr<LeaseState> reacquire(std::string_view key, std::optional<std::chrono::milliseconds> leaseTime,
                                        std::string token);

  // A thread hold, for close() to release: InterruptedError (released first) when the lock was
  // closed as it was acquired. forget() when the hold ends.
  void keep(const std::shared_ptr<LeaseState>& lease) { holds_.keep(lease); }
  void forget(const LeaseState& lease) noexcept { holds_.forget(lease); }
  // Every wait ends (InterruptedError), new ones are refused, every kept hold is released (each
  // within the backend's command timeout, logged "released at close"). Idempotent.
  void close() noexcept { holds_.close(); }
  [[nodiscard]] bool closed() const noexcept { return holds_.closed(); }
  // InterruptedError: the lock was closed. `what`: "lock 'k'".
  [[noreturn]] void throwClosed(const std::string& what) const { holds_.throwClosed(what); }

  // A fixed lease's end moved to `ttl` from now (ILock::extend); its local deadline with it.
  void extend(LeaseState& lease, std::chrono::milliseconds ttl);
  // The lease's local deadline minus now; zero once ended.
  [[nodiscard]] std::chrono::milliseconds remaining(const LeaseState& lease) const;

  // acquire() through the attempt `make` builds (a semaphore's permits), holding a lease of `kind`
  // that weighs `weight` in the held gauge (the permits); ended as acquire() by `cancel` or close().
  using MakeAttempt = std::function<std::unique_ptr<Attempt>(const AttemptTools& tools, const WaitPolicy& policy)>;
  std::shared_ptr<LeaseState> acquireBy(std::string_view key, Deadline deadline,
                                        std::optional<std::chrono::milliseconds> leaseTime, LeaseKind kind,
                                        const CancelToken& cancel, const MakeAttempt& make, std::uint32_t weight = 1);

  // Runs the attempt `make` builds in the lock's wait loop, as acquireBy, without taking a lease
  // of what it returns (a Condition's wait for its signal): Held once it is over.
  std::optional<Held> waitBy(std::string_view key, Deadline deadline, std::chrono::milliseconds ttl,
                             const CancelToken& cancel, const MakeAttempt& make);

  // Releases a lease. Released when the server released it now while the lease was valid, or
  // shows that an earlier try of this release ran (its reply lost); otherwise LockLostError (the
  // lease is finished either way). A backend error leaves the lease held so the caller can retry,
  // in doubt after a ConnectionError (the retry asks the server). Never decided by local
  // validity alone. NotOwnerError, sending nothing, for a lease a parent acquired before fork().
  void release(LeaseState& lease);

  // release() that logs instead of throwing; on any failure the lease is finished (no more
  // renewals) and ends at its TTL. False when the release was not clean.
  bool releaseQuietly(LeaseState& lease) noexcept;

  [[nodiscard]] bool isValid(const LeaseState& lease) const { return lease.validAt(clock_->now()); }
  // The lock's clock now (the gauges' read time).
  [[nodiscard]] Clock::time_point now() const { return clock_->now(); }

  // A hold (`from` its phase now) whose changing script was cut off after it may have run (a
  // Condition's await): it may give the key up whenever the server gets to it, so it is lost now
  // (isHeld false, unlock LockLostError, the lost handler told, counted), and its token's key is
  // released on the cleanup lane, in case the script never runs. No-op when it had left `from`.
  void giveUpInDoubt(LeaseState& lease, LeasePhase from, const char* why) noexcept;

  void setLostHandler(ILock::LostHandler handler);
  [[nodiscard]] LockStats stats() const { return counters_->snapshot(); }
  [[nodiscard]] const LockOptions& options() const noexcept { return options_; }
  [[nodiscard]] const LockCapabilities& capabilities() const noexcept { return capabilities_; }
  // Keeps a Condition waiter's place (LeaseKind::Awaiting) until it is signalled or finished.
  void keepPlace(std::shared_ptr<LeaseState> place) { places_->add(std::move(place)); }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::string describe() const { return backend_->describe(); }
  [[nodiscard]] const std::shared_ptr<IOperator>& backend() const noexcept { return backend_; }
  LockCounters& counters() noexcept { return *counters_; }
  [[nodiscard]] const LockCounters& counters() const noexcept { return *counters_; }

  // For an async waiter of a fair lock (FairAsyncQueue.h), by its `token`: one try that joins or
  // renews its place (acquired: the key is the token's); the key taken as a lease when it is the
  // token's (one try that never queues; nullptr when not); the place left for good, within
  // `deadline`, else on the cleanup lane. The fair lock's only.
  FairAcquireResult joinFairQueue(std::string_view key, const std::string& token,
                                  std::optional<std::chrono::milliseconds> leaseTime);
  // A hand-off heard by the token's grant watch, confirmed by the server (the claim extended to
  // the hold's ttl: GrantClaim.h): the lease; nullptr when the key is not the token's (any more).
  std::shared_ptr<LeaseState> claimGrant(std::string_view key, const std::string& token, std::uint64_t fencingToken,
                                         std::optional<std::chrono::milliseconds> leaseTime);
  std::shared_ptr<LeaseState> takeAs(std::string_view key, std::optional<std::chrono::milliseconds> leaseTime,
                                     const CancelToken& cancel, std::string token);
  void leaveFairQueue(std::string_view key, const std::string& token,
                      std::optional<std::chrono::milliseconds> leaseTime, CallBudget::TimePoint deadline) noexcept;

 private:
  // The ttl of a hold of `leaseTime` (unset: the lock's own, renewed by the watchdog).
  [[nodiscard]] std::chrono::milliseconds ttlFor(std::optional<std::chrono::milliseconds> leaseTime) const {
    if (!leaseTime) leaseTime = options_.leaseTime;
    return leaseTime ? *leaseTime : options_.watchdogLease;
  }
  // acquire() with the fair waiter's `token` (empty: a new one).
  std::shared_ptr<LeaseState> acquireAs(std::string_view key, Deadline deadline,
                                        std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel,
                                        std::string token);
  // The lease of what `attempt` holds: watched by the watchdog when `renewed`.
  std::shared_ptr<LeaseState> holding(std::string_view key, Attempt& attempt, const Held& held,
                                      std::chrono::milliseconds ttl, bool renewed,
                                      LeaseKind kind = LeaseKind::Exclusive, std::uint32_t weight = 1);
  // The same for `token`; `how` names the kind of acquire in the log ("fair, ").
  std::shared_ptr<LeaseState> holding(std::string_view key, std::string token, const char* how, const Held& held,
                                      std::chrono::milliseconds ttl, bool renewed,
                                      LeaseKind kind = LeaseKind::Exclusive, std::uint32_t weight = 1);
  // LockLostError for `lease`, moving it from Releasing to Lost when `releasing` (and counting it).
  [[noreturn]] void throwLost(LeaseState& lease, bool releasing, const char* what);
  std::shared_ptr<Watchdog> makeWatchdog();
  std::shared_ptr<Watchdog> makePlaceWatchdog();
  // The shared thread, or a new one of the lock's own.
  [[nodiscard]] std::shared_ptr<WatchdogThread> watchdogThread() const;
  [[noreturn]] void throwInherited(const LeaseState& lease) const;

  const std::uint64_t id_;
  const std::shared_ptr<IOperator> backend_;
  const LockCapabilities capabilities_;
  const std::shared_ptr<IWait> wait_;
  const std::shared_ptr<Clock> clock_;
  Clock* const waitClock_;  // waitClockOf(clock_): the waits' clock, nullptr for the steady one
  const LockOptions options_;
  const Log log_;
  const std::shared_ptr<LockCounters> counters_;  // shared with the watchdog
  const std::shared_ptr<WatchdogHost> watchdogs_;  // the shared watchdog thread; null: the lock's own

  ForkLocal<WaiterQueue> waiters_;  // a forked child queues only its own threads
  ForkLocal<ContendedReleases> contended_;  // a forked child's own: a parent's thread may have held its mutex

  // The lost handler as the lock was given it, for the watchdog a forked child makes (whose first
  // use may come at any moment after a fork: hence a mutex the fork never catches held).
  ForkSafeMutex handlerMutex_;
  ILock::LostHandler lostHandler_;  // guarded by handlerMutex_

  ForkLocal<CleanupLane> cleanup_;  // a forked child's own: the parent's thread is not there

  KeptHolds holds_;  // the close token every wait listens to, and the thread holds close() releases

  // Last: made from the members above; stopped by the destructor. A forked child gets its own,
  // which renews only the child's leases; the parent's thread does not exist there. On the
  // shared thread when there is one (a Client's), with the places too.
  ForkLocal<Watchdog> watchdog_;
  // The Condition waiters' places (ConditionRenewer), renewed for options_.waiterLease; its thread
  // starts with the first waiter. Null when the backend keeps no conditions.
  ForkLocal<Watchdog> places_;
};

}  // namespace dlock::detail
