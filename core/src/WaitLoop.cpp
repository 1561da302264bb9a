// SPDX-License-Identifier: Apache-2.0
#include "WaitLoop.h"

#include <chrono>

#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

std::optional<Held> WaitLoop::run(Attempt& attempt, WaitPolicy& policy) {
  if (!policy.once()) {
    if (const auto until = attempt.holdBackUntil()) policy.holdBack(*until);
  }
  WaitState state;
  std::optional<WaiterQueue::Ticket> turn;
  while (true) {
    const std::optional<TryResult> result = tryOnce(attempt, policy, state);
    if (!result) continue;  // cut off; the outage's pause is over
    if (const Held* held = std::get_if<Held>(&*result)) {
      stopWaiting(state, true);
      return *held;
    }
    const SteadyTime now = std::chrono::steady_clock::now();
    state.last = std::get<Waiting>(*result);
    state.leftOnServer = state.last.queued;
    ++state.failures;
    if (!state.waitingSince) state.waitingSince = now;
    if (policy.over(now)) return timedOut(attempt, policy, state);
    if (WaiterQueue* local = attempt.processQueue(); local != nullptr && !turn) {
      // Queue behind this process's other waiters for the key; only the head talks to the backend.
      turn.emplace(*local, key_);
      if (!turn->waitForTurn(policy.deadline())) return timedOut(attempt, policy, state);
      if (!turn->first()) continue;  // our turn after others': the key may be free by now
    }
    if (joinNow(attempt, policy, state)) continue;
    const SteadyTime pausing = std::chrono::steady_clock::now();
    const Pause pause{policy.remaining(pausing),
                      policy.pauseAfter(state.last.holderTtl, attempt.placeRenewal(), pausing), policy.callDeadline()};
    if (std::optional<Held> held = attempt.await(state, pause)) {
      stopWaiting(state, true);
      return held;
    }
  }
}

std::optional<TryResult> WaitLoop::tryOnce(Attempt& attempt, WaitPolicy& policy, WaitState& state) {
  state.tryNumber = counters_.attempts.fetch_add(1, std::memory_order_relaxed);
  try {
    const CallBudget budget = policy.call();
    TryResult result = attempt.tryAcquire(state);
    policy.answered();
    return result;
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
    policy.rideOut(error, "dlock: lock " + quoteKey(key_) + " on " + backend_.describe());
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
  const CallBudget budget(policy.callDeadline());
  attempt.leave(state);
}

std::optional<Held> WaitLoop::timedOut(Attempt& attempt, const WaitPolicy& policy, const WaitState& state) {
  leave(attempt, policy, state);
  stopWaiting(state, false);
  counters_.failedTries.fetch_add(1, std::memory_order_relaxed);
  return std::nullopt;
}

void WaitLoop::stopWaiting(const WaitState& state, bool held) noexcept {
  if (!state.waitingSince) return;
  const auto waited = std::chrono::steady_clock::now() - *state.waitingSince;
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
