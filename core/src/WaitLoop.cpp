// SPDX-License-Identifier: Apache-2.0
#include "WaitLoop.h"

#include <chrono>

#include "dlock/Validation.h"
#include "dlock/detail/Log.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

std::optional<Held> WaitLoop::run(Attempt& attempt, WaitPolicy& policy) {
  WaitState state;
  if (policy.interrupted()) policy.throwInterrupted(what());  // before anything is sent
  if (!policy.once()) {
    // A cancel or close() cuts off even the first try in flight (Socket.cpp's sliced wait): a wait
    // ends within milliseconds of its cancel whatever the server does.
    policy.listen();
    if (const auto until = attempt.holdBackUntil()) policy.holdBack(*until);
  }
  std::optional<WaiterQueue::Ticket> turn;
  while (true) {
    if (policy.interrupted()) interrupted(attempt, policy, state);
    bool refusedLate = false;
    const std::optional<TryResult> result = tryOnce(attempt, policy, state, refusedLate);
    if (refusedLate) return timedOut(attempt, policy, state);
    if (!result) continue;  // cut off; the outage's pause is over
    if (const Held* held = std::get_if<Held>(&*result)) return holding(attempt, policy, state, *held);
    const SteadyTime now = policy.now();
    state.last = std::get<Waiting>(*result);
    state.leftOnServer = state.last.queued;
    ++state.failures;
    if (!state.waitingSince) state.waitingSince = now;
    if (policy.over(now)) return timedOut(attempt, policy, state);
    policy.listen();  // every pause from here on ends on a cancel
    if (WaiterQueue* local = attempt.processQueue(); local != nullptr && !turn) {
      // Queue behind this process's other waiters for the key; only the head talks to the backend.
      turn.emplace(*local, key_);
      if (!turn->waitForTurn(policy.deadline()) && !policy.interrupted()) return timedOut(attempt, policy, state);
      // Interrupted, or our turn after others' (the key may be free by now): back to the top.
      if (policy.interrupted() || !turn->first()) continue;
    }
    if (joinNow(attempt, policy, state)) continue;
    const SteadyTime pausing = policy.now();
    const Pause pause{policy.remaining(pausing),
                      policy.pauseAfter(state.last.holderTtl, attempt.placeRenewal(), pausing), policy.callDeadline()};
    std::optional<Held> held;
    try {
      held = attempt.await(state, pause);
    } catch (const InterruptedError&) {  // a call confirming a hand-off, cut off by the cancel
      state.leftOnServer = true;
      interrupted(attempt, policy, state);
    }
    if (held) return holding(attempt, policy, state, *held);
  }
}

std::optional<Held> WaitLoop::holding(Attempt& attempt, const WaitPolicy& policy, WaitState& state, const Held& held) {
  // A grant that raced a cancel: given back by token (the attempt's leave), never kept unowned.
  if (policy.interrupted()) {
    state.leftOnServer = true;
    interrupted(attempt, policy, state);
  }
  stopWaiting(policy, state, true);
  return held;
}

void WaitLoop::interrupted(Attempt& attempt, const WaitPolicy& policy, const WaitState& state) {
  {
    // The leave runs now for no longer than a reply's floor (a healthy server answers within it,
    // so the caller returns with the server clean), else on the cleanup lane: the cancel ends the
    // wait within milliseconds whatever the server or the link does. Outside the cancelled wait's
    // wake-up, which would cut the leave's calls off at once.
    Wakeup unwoken;
    const Wakeup::Scope scope(unwoken);
    const CallBudget budget(CallBudget::Clock::now(), policy.answerFloor());
    attempt.leave(state);
  }
  stopWaiting(policy, state, false);
  policy.throwInterrupted(what());
}

std::string WaitLoop::what() const { return "dlock: lock " + quoteKey(key_) + " on " + backend_.describe(); }

std::optional<TryResult> WaitLoop::tryOnce(Attempt& attempt, WaitPolicy& policy, WaitState& state,
                                           bool& refusedLate) {
  state.tryNumber = counters_.attempts.fetch_add(1, std::memory_order_relaxed);
  try {
    const CallBudget budget = policy.call();
    TryResult result = attempt.tryAcquire(state);
    policy.answered();
    return result;
  } catch (const InterruptedError&) {
    // A cancel cut the call off in flight (Socket.cpp): it may have landed, or land yet.
    state.leftOnServer = true;
    interrupted(attempt, policy, state);
  } catch (const LateCallError& error) {
    // The server answered, refusing a try that reached it after its budget: nothing of it ran
    // (what an earlier try left stays for leave()). At the wait's end that is a wait that ran
    // out; before it, a slow path or server, ridden out as an outage is.
    logFailure(error);
    if (!policy.once() && policy.over(policy.now())) {
      refusedLate = true;
      return std::nullopt;
    }
    if (policy.once()) {
      leave(attempt, policy, state);
      throw;
    }
    rideOut(attempt, policy, state, error);
    return std::nullopt;
  } catch (const ConnectionError& error) {
    logFailure(error);
    state.leftOnServer = true;  // it may have landed (or may land yet): queued us, or taken the key
    if (policy.once()) {
      leave(attempt, policy, state);  // so a throwing tryLock holds nothing
      throw;
    }
    rideOut(attempt, policy, state, error);
    return std::nullopt;
  } catch (const std::exception& error) {
    logFailure(error);
    state.leftOnServer = true;  // an error reply ran nothing, but an earlier try may have landed
    leave(attempt, policy, state);
    throw;
  }
}

bool WaitLoop::joinNow(Attempt& attempt, WaitPolicy& policy, const WaitState& state) {
  try {
    const CallBudget budget = policy.call();
    return attempt.join(state);
  } catch (const InterruptedError&) {
    interrupted(attempt, policy, state);
  } catch (const ConnectionError& error) {
    rideOut(attempt, policy, state, error);
    return true;
  } catch (...) {
    leave(attempt, policy, state);
    throw;
  }
}

void WaitLoop::rideOut(Attempt& attempt, WaitPolicy& policy, const WaitState& state, const ConnectionError& error) {
  try {
    policy.rideOut(error, what());
  } catch (...) {
    leave(attempt, policy, state);
    throw;
  }
  counters_.outageRetries.fetch_add(1, std::memory_order_relaxed);
  const Log log = logger();
  if (log->should_log(spdlog::level::debug)) {
    log->debug("dlock: retrying {} on {} after: {}", quoteKey(key_), backend_.describe(), error.what());
  }
}

void WaitLoop::leave(Attempt& attempt, const WaitPolicy& policy, const WaitState& state) noexcept {
  const CallBudget budget(policy.callDeadline(), policy.answerFloor());
  attempt.leave(state);
}

std::optional<Held> WaitLoop::timedOut(Attempt& attempt, const WaitPolicy& policy, const WaitState& state) {
  leave(attempt, policy, state);
  stopWaiting(policy, state, false);
  counters_.failedTries.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

void WaitLoop::stopWaiting(const WaitPolicy& policy, const WaitState& state, bool held) noexcept {
  if (!state.waitingSince) return;
  const auto waited = policy.now() - *state.waitingSince;
  counters_.waits.record(std::chrono::duration_cast<milliseconds>(waited).count());
  if (held) counters_.handOffs.fetch_add(1, std::memory_order_relaxed);
}

void WaitLoop::logFailure(const std::exception& error) const {
  const Log log = logger();
  if (log->should_log(spdlog::level::debug)) {
    log->debug("dlock: acquiring {} on {} failed: {}", quoteKey(key_), backend_.describe(), error.what());
  }
}

}  // namespace dlock::detail
