// SPDX-License-Identifier: Apache-2.0
// LeaseState.h — one acquisition as the lock, the watchdog and a Lease handle share it: fixed
// facts (key, token, fencing token, ttl), the local deadline, and one phase.
//
//   phase       what it means                               leaves for (by whom)
//   Held        ours, as far as this client knows           Releasing (release), Lost (watchdog),
//                                                           Abandoned (a quiet release gave up)
//   Releasing   a release is on its way: a renewal that     Released, Lost (the server's answer),
//               finds the key gone may be seeing it         Held (refused: nothing ran),
//                                                           InDoubt (cut off: it may have run)
//   InDoubt     a release was cut off after it may have     Releasing (a retry, decided by the
//               run; the key's absence proves nothing,      server's record), Lost (its local
//               and it is not reported held                 deadline passed), Abandoned
//   Released    the server confirmed the release            (final)
//   Yielded     a Condition's await gave the key up: the    (final)
//               thread holds nothing until it takes the
//               key again (a new lease)
//   Lost        the server no longer has it for us, or it   (final)
//               outlived its local deadline unrenewed
//   Abandoned   no longer renewed; it ends at its TTL        (final)
//
// Every change is one compare-and-swap checked against this table, so a renewal and a release
// racing for one lease settle it once: whoever moves it first decides, the other sees the result.
// Thread safety: thread-safe; the fixed facts never change after construction.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "LockCounters.h"
#include "dlock/Clock.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

// How long a lease taken or renewed for `ttl` is known to hold from the moment the request was
// sent, given the validity the backend reported (AcquireResult/ExtendResult::validity: zero
// means the whole ttl). One rule for acquisitions and renewals.
inline std::chrono::milliseconds knownValidity(std::chrono::milliseconds reported, std::chrono::milliseconds ttl) {
  return reported.count() > 0 ? std::min(reported, ttl) : ttl;
}

// What a lease holds, for its renewer (LeaseRenewer.h) and its release. Awaiting: a Condition
// waiter's place (ConditionAttempt.h), which ends when the waiter is signalled.
enum class LeaseKind : std::uint8_t { Exclusive, Read, Write, Permits, Awaiting };
static_assert(static_cast<std::size_t>(LeaseKind::Awaiting) + 1 == kLeaseKinds, "the gauges' index (LockCounters.h)");

enum class LeasePhase : std::uint8_t { Held, Releasing, InDoubt, Released, Lost, Abandoned, Yielded };

// True when the table above allows `from` → `to`.
constexpr bool leaseTransitionAllowed(LeasePhase from, LeasePhase to) {
  switch (from) {
    case LeasePhase::Held:
      return to == LeasePhase::Releasing || to == LeasePhase::Lost || to == LeasePhase::Abandoned;
    case LeasePhase::Releasing:
      return to == LeasePhase::Released || to == LeasePhase::Lost || to == LeasePhase::Held ||
             to == LeasePhase::InDoubt || to == LeasePhase::Yielded;
    case LeasePhase::InDoubt:
      return to == LeasePhase::Releasing || to == LeasePhase::Lost || to == LeasePhase::Abandoned;
    case LeasePhase::Released:
    case LeasePhase::Lost:
    case LeasePhase::Abandoned:
    case LeasePhase::Yielded:
      return false;
  }
  return false;
}

// Whether a release's answer shows its section protected to the end: the key freed by this try while
// the lease had time left (`unexpired` when it was sent), or the server's record of an earlier try of
// this release (`earlier`: the backend's own retry, or the retry of an unlock cut off). The record is
// always this hold's own release: the one other script that writes it, a Condition's await, ends the
// hold when it answers and loses it when it is cut off (LockCore::giveUpInDoubt), so no unlock of the
// hold follows it.
constexpr bool releasedCleanly(bool released, bool earlier, bool unexpired) { return earlier || (released && unexpired); }

class LeaseState {
 public:
  LeaseState(std::string keyIn, std::string tokenIn, std::uint64_t fence, std::chrono::milliseconds ttlIn,
             bool renewedIn, Clock::time_point deadline, LeaseKind kindIn = LeaseKind::Exclusive,
             std::string conditionIn = {})
      : key(std::move(keyIn)),
        token(std::move(tokenIn)),
        fencingToken(fence),
        ttl(ttlIn),
        renewed(renewedIn),
        kind(kindIn),
        condition(std::move(conditionIn)),
        deadlineNanos_(deadline.time_since_epoch().count()) {}

  const std::string key;
  const std::string token;
  const std::uint64_t fencingToken;
  const std::chrono::milliseconds ttl;
  const bool renewed;  // kept alive by the watchdog
  const LeaseKind kind;
  const std::string condition;  // Awaiting: the condition's name
  // A lease acquired before a fork() is the parent's: a child never renews or releases it.
  const std::uint64_t forkGenerationAtAcquire = forkGeneration();

  LeaseState(const LeaseState&) = delete;
  LeaseState& operator=(const LeaseState&) = delete;
  // A fixed lease destroyed before a final phase leaves the gauge's registry, which points at it.
  ~LeaseState() {
    if (counters_ && !renewed && !isFinal(phase())) counters_->fixed.finish(this, counters_->held);
  }

  [[nodiscard]] LeasePhase phase() const { return phase_.load(std::memory_order_acquire); }

  // Moves from `from` to `to` if the lease is in `from` now; false otherwise (someone else moved
  // it first). Only moves the table allows.
  bool transition(LeasePhase from, LeasePhase to) {
    if (!leaseTransitionAllowed(from, to)) return false;
    if (!phase_.compare_exchange_strong(from, to, std::memory_order_acq_rel, std::memory_order_acquire)) return false;
    // A final phase has no way out, so exactly one transition uncounts the lease.
    if (counters_ && isFinal(to)) uncount();
    return true;
  }

  // Counts the lease in `counters`' held gauge (`weight`: a semaphore's permits) until it reaches
  // a final phase. Called once, by whoever made it, before anyone else can see it.
  // A fixed lease (not renewed) is counted until its local deadline too (FixedHolds.h).
  void countIn(std::shared_ptr<LockCounters> counters, std::int64_t weight) {
    counters_ = std::move(counters);
    weight_ = weight;
    if (renewed) {
      counters_->held[kindIndex()].fetch_add(weight_, std::memory_order_relaxed);
    } else {
      counters_->fixed.start(this, kindIndex(), weight_, deadlineNanos_, counters_->held);
    }
  }

  // No more renewals, the lease ends at its TTL (its holder gave up on it): Held or InDoubt →
  // Abandoned. False when it had finished already.
  bool abandon() {
    return transition(LeasePhase::Held, LeasePhase::Abandoned) ||
           transition(LeasePhase::InDoubt, LeasePhase::Abandoned);
  }

  // Released, lost, abandoned or yielded: the watchdog lets it go.
  [[nodiscard]] bool finished() const { return isFinal(phase()); }
  [[nodiscard]] bool lost() const { return phase() == LeasePhase::Lost; }

  [[nodiscard]] bool inheritedAcrossFork() const { return forkGenerationAtAcquire != forkGeneration(); }

  // When the lease ends on the lock's clock, as far as this client knows: the time the acquire
  // (or the last renewal) was sent plus its known validity, so the estimate errs on the early side.
  [[nodiscard]] Clock::time_point deadline() const {
    return Clock::time_point(Clock::duration(deadlineNanos_.load(std::memory_order_acquire)));
  }
  void setDeadline(Clock::time_point deadline) {
    deadlineNanos_.store(deadline.time_since_epoch().count(), std::memory_order_release);
  }
  // Held as far as this client knows: not lost, not with a release in doubt (which may run on the
  // server at any moment), before its deadline, and this process's.
  [[nodiscard]] bool validAt(Clock::time_point now) const {
    return phase() != LeasePhase::InDoubt && unexpiredAt(now);
  }
  // Not lost and before its deadline, whatever release is on its way: whether the section was
  // protected up to a release sent now.
  [[nodiscard]] bool unexpiredAt(Clock::time_point now) const {
    return !lost() && now < deadline() && !inheritedAcrossFork();
  }

 private:
  static constexpr bool isFinal(LeasePhase phase) {
    return phase == LeasePhase::Released || phase == LeasePhase::Lost || phase == LeasePhase::Abandoned ||
           phase == LeasePhase::Yielded;
  }
  [[nodiscard]] std::size_t kindIndex() const noexcept { return static_cast<std::size_t>(kind); }
  void uncount() {
    if (renewed) {
      counters_->held[kindIndex()].fetch_sub(weight_, std::memory_order_relaxed);
    } else {
      counters_->fixed.finish(this, counters_->held);
    }
  }

  std::atomic<LeasePhase> phase_{LeasePhase::Held};
  std::shared_ptr<LockCounters> counters_;  // set once by countIn, before the lease is shared
  std::int64_t weight_ = 0;
  std::atomic<Clock::duration::rep> deadlineNanos_;
};

}  // namespace dlock::detail
