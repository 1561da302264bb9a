// SPDX-License-Identifier: Apache-2.0
// WaitPolicy.h — every pause of one wait, taken from the caller's deadline (DESIGN.md, "One wait
// loop"):
//
//   pause                         until                                        by
//   hold back after our release   the window noted at the release, cut at      holdBack
//                                 the deadline
//   for our turn in the process   the deadline (WaiterQueue)                   deadline()
//   between two tries             the deadline, the waiter place's renewal,    pauseAfter; the default
//                                 the holder's lease end (+1 ms)               lock's IWait gets `remaining`
//   riding out an outage          OutageRetry's back-off, cut at its budget    rideOut
//
// and what ends every one of them at once: a cancel of the caller's CancelToken or the lock's
// close() (interrupted()). The first pause installs a Wakeup (Wakeup.h) woken by either, through
// which every pause of the wait sleeps, down to the backends' watches; a wait that never pauses
// registers nothing (the uncontended cycle pays two atomic loads).
// and the deadline every backend call inside the wait must meet (CallBudget): the wait's own when
// it has one; for lock(key) without one, the outage budget's once an outage began; none for a
// single try (tryLock(key) gets the command timeout, as any call outside a wait).
// Pauses apart from it, each bounded by what it is given: an IWait's sleep (cut to `remaining`), a watch's re-subscription
// pause (cut to the wait's pause), and the backends' own schedules: a command's retries and the
// pool's reconnect back-off (within the CallBudget set here), Sentinel's promotion poll and
// Redlock's quorum of watches (their own threads and node timeouts), shared by every wait.
// On a lock's clock other than the steady one (a VirtualClock), the deadline, every pause and
// recheck and the outage budget are on that clock (the caller's deadline is moved onto it once,
// here), and the wait registers a Wakeup made with it even when nothing can cancel it; the calls'
// budgets and the round trips stay in real time. On the steady clock nothing of this runs.
// Owner: the waiting call. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>

#include "OutageRetry.h"
#include "dlock/Cancel.h"
#include "dlock/ILock.h"
#include "dlock/LockError.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

// The clock a lock's waits run on: nullptr for the steady clock (the plain waits), else `clock`.
inline Clock* waitClockOf(const std::shared_ptr<Clock>& clock) noexcept {
  if (clock == nullptr) return nullptr;
  const Clock& held = *clock;  // named first: typeid of a dereference warns under clang
  return typeid(held) == typeid(SteadyClock) ? nullptr : clock.get();
}

class WaitPolicy {
 public:
  using Deadline = ILock::Deadline;
  using SteadyTime = std::chrono::steady_clock::time_point;
  static constexpr Deadline kTryOnce = Deadline::min();  // tryLock(key): one try, no wait

  // What may end a wait early: the caller's token and the lock's (cancelled by close()). Held by
  // reference: pass tokens that outlive the policy, never temporaries (`source.token()`).
  struct Interrupts {
    const CancelToken& caller;
    const CancelToken& closing;
  };

  // `deadline`: the caller's (kTryOnce, ILock::kNoDeadline for none), on the steady clock;
  // `outageTolerance` bounds an outage in a wait without one (LockOptions::outageTolerance);
  // `clock`: the lock's, from waitClockOf (nullptr: the steady clock).
  WaitPolicy(Deadline deadline, std::chrono::milliseconds outageTolerance, Interrupts interrupts = {kNever, kNever},
             Clock* clock = nullptr)
      : clock_(clock), deadline_(onWaitClock(deadline, clock)), outageTolerance_(outageTolerance), interrupts_(interrupts) {}

  // Now on the wait's clock: the time deadline(), over() and the pauses are on.
  [[nodiscard]] SteadyTime now() const { return clock_ == nullptr ? std::chrono::steady_clock::now() : clock_->now(); }

  [[nodiscard]] bool once() const noexcept { return deadline_ == kTryOnce; }
  [[nodiscard]] Deadline deadline() const noexcept { return deadline_; }
  // No wait left at `now`: a single try, or the deadline has come (never sooner, as the JDK's).
  [[nodiscard]] bool over(SteadyTime now) const noexcept { return once() || now >= deadline_; }
  // The pause's bound from `now`: until the last attempt's time (lastAttemptAt), rounded up; zero
  // past it (tries follow at the least pause until the deadline); milliseconds::max() for no deadline.
  [[nodiscard]] std::chrono::milliseconds remaining(SteadyTime now) const noexcept;
  // When the last attempt is sent: a round trip (the longest this wait measured) before the
  // deadline, so that its answer comes by the deadline on a slow link too.
  [[nodiscard]] Deadline lastAttemptAt() const noexcept {
    return deadline_ == Deadline::max() || once()
               ? deadline_
               : deadline_ - std::chrono::duration_cast<Deadline::duration>(roundTrip_);
  }
  // The least time a call inside the wait is given, however little budget is left: twice the
  // longest round trip measured (a healthy link's jitter), so that a reply on its way is read, never
  // cut off as a timeout (which closes the connection); CallBudget's floor before any answer.
  [[nodiscard]] std::chrono::milliseconds answerFloor() const noexcept {
    return std::chrono::ceil<std::chrono::milliseconds>(2 * roundTrip_) + CallBudget::kLastAttemptFloor;
  }

  // The budget of a backend call made now (see above); its send time starts an outage's tolerance
  // if it fails. Held for the call's length: `const CallBudget budget = policy.call();`.
  [[nodiscard]] CallBudget call() {
    sent_ = std::chrono::steady_clock::now();
    sentOnClock_ = clock_ == nullptr ? sent_ : clock_->now();
    return CallBudget(callDeadline(), answerFloor());
  }
  // In real time, as every call's budget is.
  [[nodiscard]] CallBudget::TimePoint callDeadline() const noexcept {
    if (once()) return CallBudget::TimePoint::max();
    if (deadline_ != Deadline::max()) return inRealTime(deadline_);
    return outage_ ? inRealTime(outage_->deadline()) : CallBudget::TimePoint::max();
  }

  // After a call inside the wait failed with `error`: pauses (OutageRetry's back-off, the last
  // attempt at the budget's end) and returns when another try is due, or throws ConnectionError
  // naming `what` once the budget is spent. A single try is not retried: call it only in a wait.
  void rideOut(const ConnectionError& error, const std::string& what);
  // The call made through call() was answered: a later outage gets a budget of its own, and its
  // round trip counts for the last attempt's time and every call's floor.
  void answered() noexcept {
    outage_.reset();
    const SteadyTime::duration took = std::chrono::steady_clock::now() - sent_;
    roundTrip_ = std::max(roundTrip_, std::min(took, SteadyTime::duration(kLongestRoundTrip)));
  }

  // The pause between two tries, at most `remaining(now)`, cut to `placeRenewal` (how often a
  // place in a server queue must be renewed; max for none) and to 1 ms past `holderTtl` (0 for
  // unknown: the holder may die holding the key, and the next try finds it free); at least 1 ms.
  [[nodiscard]] std::chrono::milliseconds pauseAfter(std::chrono::milliseconds holderTtl,
                                                     std::chrono::milliseconds placeRenewal, SteadyTime now) const noexcept;

  // Sleeps until `until` (real time: a release's way to other processes), cut at the deadline (a
  // single try never holds back).
  void holdBack(SteadyTime until);

  // The caller's token was cancelled or the lock closed: the wait must end (InterruptedError).
  [[nodiscard]] bool interrupted() const noexcept {
    return interrupts_.caller.cancelRequested() || interrupts_.closing.cancelRequested();
  }
  // InterruptedError for `what` ("dlock: lock 'k' on ..."), saying which of the two it was.
  [[noreturn]] void throwInterrupted(const std::string& what) const;
  // From the wait's first try (not a single try's): from now on every pause and every call in
  // flight of this wait (on this thread) ends on a cancel.
  void listen();

 private:
  // The wake of this wait's pauses, installed on this thread, and what wakes it.
  struct Listening {
    Wakeup wakeup;
    Wakeup::Scope scope{wakeup};
    CancelCallback onCancel;
    CancelCallback onClose;
    Listening(const Interrupts& interrupts, Clock* clock)
        : wakeup(clock),
          onCancel(interrupts.caller, [this] { wakeup.wake(); }),
          onClose(interrupts.closing, [this] { wakeup.wake(); }) {}
  };
  // `deadline` (steady) moved onto `clock`: what was left of it, in whole milliseconds (the unit
  // the caller gave), from the clock's now.
  static Deadline onWaitClock(Deadline deadline, Clock* clock);
  // A time on the wait's clock as the steady clock's.
  [[nodiscard]] SteadyTime inRealTime(SteadyTime onClock) const noexcept;
  static inline const CancelToken kNever{};
  // A round trip longer than this is no link's but a stalled server's: not waited for at every call.
  static constexpr std::chrono::milliseconds kLongestRoundTrip{1000};


  Clock* const clock_;                 // nullptr: the steady clock
  const Deadline deadline_;            // on the wait's clock
  const std::chrono::milliseconds outageTolerance_;
  std::optional<OutageRetry> outage_;  // from a call's failure to the next answer
  SteadyTime sent_;                    // of the last call made through call()
  SteadyTime sentOnClock_;             // the same on the wait's clock
  SteadyTime::duration roundTrip_{0};  // the longest answered call of this wait
  const Interrupts interrupts_;
  std::unique_ptr<Listening> listening_;  // from the first try
};

}  // namespace dlock::detail
