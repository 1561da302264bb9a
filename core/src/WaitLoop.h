// SPDX-License-Identifier: Apache-2.0
// WaitLoop.h — the one wait of the library: drives an Attempt (Attempt.h) through tries, joins and
// pauses until it holds the key or its policy (WaitPolicy.h) says the wait is over.
//
//   try ── held ───────────────────────────────────────────────────────────▶ Held
//    │ └─ waiting ─ over? ── yes ─ leave ──────────────────────────────────▶ nullopt (timed out)
//    │               └ no ─ first time: queue behind this process's waiters (waited: try)
//    │                      join: listening began now ─ try again
//    │                      await (a pause) ─ handed over ────────────────▶ Held
//    │                                       └ else ─ try again
//    ├─ LateCallError (refused unrun) at the wait's end ─ leave ───────────▶ nullopt (timed out)
//    └─ ConnectionError ─ a wait: the policy's outage pause, then try again (past its budget: leave, throw)
//                         a single try: leave, throw; another error: leave, throw
//
// Interrupted (the caller's CancelToken, or the lock's close()): before the first try, nothing is
// sent; before every later try and after every pause (each wakes at once: WaitPolicy::listen),
// the attempt leaves and InterruptedError is thrown; a try in flight is completed first, and a
// key it or a hand-off gave us then is given back by the attempt's leave (by token).
//
// Every backend call runs inside the policy's CallBudget. Counts tries, outage retries, failed
// tries and the time spent waiting (LockCounters); the caller counts acquisitions.
// Owner: one acquire call. Thread safety: not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "Attempt.h"
#include "LockCounters.h"
#include "WaitPolicy.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

class WaitLoop {
 public:
  WaitLoop(std::string_view key, const IOperator& backend, LockCounters& counters) noexcept
      : key_(key), backend_(backend), counters_(counters) {}

  // Held when `attempt` took the key; nullopt when `policy` ended the wait first. Throws what the
  // backend throws (ConnectionError once the outage budget is spent), or InterruptedError; the
  // attempt left then.
  std::optional<Held> run(Attempt& attempt, WaitPolicy& policy);

 private:
  // One try; nullopt when it was cut off and the outage is ridden out (try again), or, with
  // `refusedLate` set, when the server refused it at the wait's end (the wait ran out).
  std::optional<TryResult> tryOnce(Attempt& attempt, WaitPolicy& policy, WaitState& state, bool& refusedLate);
  // join() within the budget; true when a try is due before pausing.
  bool joinNow(Attempt& attempt, WaitPolicy& policy, const WaitState& state);
  void rideOut(Attempt& attempt, WaitPolicy& policy, const WaitState& state, const ConnectionError& error);
  static void leave(Attempt& attempt, const WaitPolicy& policy, const WaitState& state) noexcept;
  std::optional<Held> timedOut(Attempt& attempt, const WaitPolicy& policy, const WaitState& state);
  // `held`, unless the wait was interrupted meanwhile: then given back, and InterruptedError.
  std::optional<Held> holding(Attempt& attempt, const WaitPolicy& policy, WaitState& state, const Held& held);
  [[noreturn]] void interrupted(Attempt& attempt, const WaitPolicy& policy, const WaitState& state);
  [[nodiscard]] std::string what() const;  // "dlock: lock 'k' on <backend>", for errors
  // Records the wait that ended (a hand-off when it ended `held`), timed on the policy's clock.
  void stopWaiting(const WaitPolicy& policy, const WaitState& state, bool held) noexcept;
  void logFailure(const std::exception& error) const;

  const std::string_view key_;
  const IOperator& backend_;
  LockCounters& counters_;
};

}  // namespace dlock::detail
