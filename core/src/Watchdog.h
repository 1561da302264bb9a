// SPDX-License-Identifier: Apache-2.0
// Watchdog.h — one primitive's part of a watchdog (WatchdogThread.h, which renews the leases):
// how its leases are renewed (LeaseRenewer, or the backend's IRenewalBatch), for how long, and
// what it does with the outcomes. A renewed lease's deadline moves to the time the renewal was
// sent plus the validity the backend reported, as at acquisition. A lease the backend no longer
// has for us is lost at once; one whose renewal could not reach its node (unknown) keeps its
// deadline, and is lost at it. A lease being released is left to its release (a renewal that
// finds it gone may be seeing that release); one whose release is in doubt is lost only at its
// deadline. Losses are reported to this primitive's lost handler through its own LossNotifier,
// never on the watchdog's thread: a slow handler delays no renewal. A Condition waiter's place
// (LeaseKind::Awaiting, the lock's place watchdog) that ends is its waiter's signal, not a loss:
// it is neither reported nor counted.
// Its warnings name the lock (LockOptions::name). A renewal that fails warns, with its cause, at
// most once per kRenewalWarningInterval of the lock's clock; the next warning counts the failures
// left out meanwhile (a server restart fails every retry until it is back).
//
// Ownership: the lock core holds it by shared_ptr; the watchdog's thread by weak reference, and
// by shared_ptr while a round renews its leases.
// Owner: the lock core. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "LeaseRenewer.h"
#include "LeaseState.h"
#include "LockCounters.h"
#include "LossNotifier.h"
#include "WatchdogThread.h"
#include "dlock/Clock.h"
#include "dlock/ILock.h"
#include "dlock/IRenewalBatch.h"

namespace dlock::detail {

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  // At most one renewal-failure warning per lock in this long.
  static constexpr std::chrono::seconds kRenewalWarningInterval{10};

  // On `thread`, shared or its own. `renewer`: how this lock's kind of lease is renewed
  // (LeaseRenewer.h); `batch`: the backend's renewal of every kind at once, used instead when
  // set. `lease`: the length each renewal asks for. `lockName`: for logs.
  Watchdog(std::shared_ptr<WatchdogThread> thread, std::shared_ptr<LeaseRenewer> renewer,
           std::shared_ptr<IRenewalBatch> batch, std::chrono::milliseconds lease,
           std::shared_ptr<LockCounters> counters, std::string lockName);
  // On a thread of its own, renewing through `renewer` only.
  Watchdog(std::shared_ptr<LeaseRenewer> renewer, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
           std::shared_ptr<LockCounters> counters, std::string lockName);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

  // Starts renewing `lease` (the thread starts with the first one).
  void add(std::shared_ptr<LeaseState> lease);
  // A lease is in its care again after a release that failed (WatchdogThread::resumeCare).
  void resumeCare();

  // The handler of leases found lost (replaces the previous one); runs on the notifier's thread.
  void setLostHandler(ILock::LostHandler handler);

  // Stops renewing this primitive's leases and notifying; no handler starts after it returns
  // (unless called from the handler itself). A shared thread goes on with the others' leases.
  // Idempotent.
  void stop();

  [[nodiscard]] std::chrono::milliseconds lease() const noexcept { return lease_; }
  [[nodiscard]] std::chrono::milliseconds interval() const noexcept { return interval_; }
  [[nodiscard]] LeaseRenewer& renewer() const noexcept { return *renewer_; }
  [[nodiscard]] IRenewalBatch* batch() const noexcept { return batch_.get(); }
  [[nodiscard]] LockCounters& counters() const noexcept { return *counters_; }

  // Moves `lease` from `from` to Lost, counts it and tells the lost handler (on its own thread);
  // false when the lease had left `from` already (released, or reported, meanwhile). Also for a
  // lease this watchdog does not renew: a hold given up in doubt (LockCore::giveUpInDoubt).
  bool markLost(LeaseState& lease, LeasePhase from, const char* why);

  // The watchdog thread's calls, after a renewal of `batch` (this primitive's leases, sent at
  // `sentAt`) answered `results`; `failure`: what the call threw, if it did.
  void judgeRound(const std::vector<std::shared_ptr<LeaseState>>& batch, const std::vector<ExtendResult>& results,
                  Clock::time_point sentAt, const std::string& failure);
  // Reports `lease` lost when it is past its local deadline in the watchdog's care.
  void expireIfOverdue(LeaseState& lease, Clock::time_point now);

 private:
  void judge(LeaseState& lease, const ExtendResult& result, Clock::time_point sentAt);
  // The warning of a renewal that settled `unknown` of `batch` leases, rate limited (see the top).
  void warnRenewalFailure(std::size_t unknown, std::size_t batch, const std::string& cause);

  const std::shared_ptr<WatchdogThread> thread_;
  const std::shared_ptr<LeaseRenewer> renewer_;
  const std::shared_ptr<IRenewalBatch> batch_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<LockCounters> counters_;
  const std::shared_ptr<LossNotifier> notifier_;
  const std::string lockName_;  // quoted, for logs

  // The renewal warnings' rate limit; touched only by the watchdog's thread (judgeRound()).
  std::optional<Clock::time_point> lastWarning_;
  std::uint64_t warningsLeftOut_ = 0;

  std::atomic<bool> stopped_{false};
};

}  // namespace dlock::detail
