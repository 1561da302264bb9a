// SPDX-License-Identifier: Apache-2.0
// Watchdog.h — the lease keeper of one lock: one thread, however many leases.
//
// A lease is renewed once a third of the watchdog lease has passed since its last renewal, by its
// own local deadline: so a lease handed over with a short claim (a fair hand-off) is renewed at
// once, not a third of the lease after the first hold. Every lease due within half an interval
// goes in the same extendAll() call (one round trip per connection), so renewal traffic does not
// grow with the number of held keys. A renewed lease's deadline moves to the time the renewal was
// sent plus the validity the backend reported, as at acquisition. Outcomes are per lease: a lease
// the backend no longer has for us is lost at once; one whose renewal could not reach its node
// (unknown) is tried again after a quarter of what it has left (at most an interval), and kept
// until its own local deadline, when the thread wakes to report it lost. A lease
// being released is left to its release (a renewal that finds it gone may be seeing that release);
// one whose release is in doubt is lost only at its deadline. Losses are reported to the lost
// handler through a LossNotifier, never on this thread: a slow handler delays no renewal. A
// Condition waiter's place (LeaseKind::Awaiting, the lock's place watchdog) that ends is its
// waiter's signal, not a loss: it is neither reported nor counted.
// Its warnings name the lock (LockOptions::name). A renewal that fails warns, with its cause, at
// most once per kRenewalWarningInterval of the lock's clock; the next warning counts the failures
// left out meanwhile (a server restart fails every retry until it is back).
//
// Ownership: the lock core holds the watchdog by shared_ptr and so does the watchdog's thread.
// Owner: the lock core and the watchdog's thread. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "LeaseRenewer.h"
#include "LeaseState.h"
#include "LockCounters.h"
#include "LossNotifier.h"
#include "dlock/Clock.h"
#include "dlock/ILock.h"

namespace dlock::detail {

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  // At most one renewal-failure warning per lock in this long.
  static constexpr std::chrono::seconds kRenewalWarningInterval{10};

  // `renewer`: how this lock's kind of lease is renewed (LeaseRenewer.h). `lockName`: for logs.
  Watchdog(std::shared_ptr<LeaseRenewer> renewer, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
           std::shared_ptr<LockCounters> counters, std::string lockName);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

  // Starts renewing `lease` (the thread starts with the first one).
  void add(std::shared_ptr<LeaseState> lease);

  // The handler of leases found lost (replaces the previous one); runs on the notifier's thread.
  void setLostHandler(ILock::LostHandler handler);

  // Stops renewing and notifying; no handler starts after it returns (unless called from the
  // handler itself). Joins the threads it can. Idempotent.
  void stop();

  [[nodiscard]] std::chrono::milliseconds interval() const noexcept { return interval_; }

  // Moves `lease` from `from` to Lost, counts it and tells the lost handler (on its own thread);
  // false when the lease had left `from` already (released, or reported, meanwhile). Also for a
  // lease this watchdog does not renew: a hold given up in doubt (LockCore::giveUpInDoubt).
  bool markLost(LeaseState& lease, LeasePhase from, const char* why);

 private:
  // A lease the watchdog keeps, and when a renewal that got no answer may be tried again.
  struct Kept {
    std::shared_ptr<LeaseState> lease;
    Clock::time_point retryAt{};
  };

  void run();
  // When `kept` is next due for renewal: a third of the lease after its last one, or its retry.
  [[nodiscard]] Clock::time_point dueAt(const Kept& kept) const;
  // The time the thread must next wake: the first renewal due, or an earlier lease deadline.
  [[nodiscard]] Clock::time_point nextWake() const;  // mutex_ held
  // Renews `batch`; returns, per lease, whether its renewal went unanswered.
  std::vector<bool> renew(const std::vector<std::shared_ptr<LeaseState>>& batch);
  void judge(LeaseState& lease, const ExtendResult& result, Clock::time_point sentAt);
  void expireOverdue(const std::vector<std::shared_ptr<LeaseState>>& leases);
  // The warning of a renewal that settled `unknown` of `batch` leases, rate limited (see the top).
  void warnRenewalFailure(std::size_t unknown, std::size_t batch, const std::string& cause);

  const std::shared_ptr<LeaseRenewer> renewer_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<LockCounters> counters_;
  const std::shared_ptr<LossNotifier> notifier_;
  const std::string lockName_;  // quoted, for logs

  // The renewal warnings' rate limit; touched only by the watchdog's thread (renew()).
  std::optional<Clock::time_point> lastWarning_;
  std::uint64_t warningsLeftOut_ = 0;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Kept> leases_;                         // guarded by mutex_
  bool stopping_ = false;                            // guarded by mutex_
  bool running_ = false;                             // guarded by mutex_; the thread has started
  std::thread thread_;                               // started under mutex_
};

}  // namespace dlock::detail
