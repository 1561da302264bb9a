// SPDX-License-Identifier: Apache-2.0
#include "ConditionAttempt.h"

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using std::chrono::milliseconds;

TryResult ConditionAttempt::tryAcquire(const WaitState& /*state*/) {
  if (!parts_.joined.joined) return joinCondition();
  // The watchdog's renewal found the waiter no longer on the condition: signalled (or its place
  // ran out unrenewed: a spurious return).
  if (signalled_ || place_->finished()) return Held{};
  return Waiting{milliseconds(0), 0, true};
}

TryResult ConditionAttempt::joinCondition() {
  const LeaseState& given = parts_.given;
  if (!signals_) {
    signals_ = parts_.fair != nullptr ? parts_.fair->queue().watchGrants(tools_.key, given.token)
                                      : parts_.conditions.watchSignals(tools_.key, given.token);
  }
  parts_.joined.sent = true;
  const Clock::time_point sentAt = tools_.clock.now();
  const AwaitResult result = parts_.conditions.await(tools_.key, parts_.name, given.token, parts_.lock,
                                                     given.fencingToken, given.ttl, parts_.waiterLease);
  if (!result.awaiting) {
    refused_ = true;
    throw LockLostError("dlock: await " + quoteKey(tools_.key) + " on " + tools_.backend->describe() +
                        ": the lease had ended (fencing token " + std::to_string(given.fencingToken) +
                        "); nothing was joined");
  }
  parts_.joined.joined = true;
  if (parts_.joined.onJoined) parts_.joined.onJoined();
  place_ = std::make_shared<LeaseState>(std::string(tools_.key), given.token, given.fencingToken, given.ttl, true,
                                        sentAt + parts_.waiterLease, LeaseKind::Awaiting, std::string(parts_.name));
  parts_.keepPlace(place_);
  // A retry whose first try ran, signalled since: nothing left to wait for.
  if (result.awaitingEarlier && result.position == 0) return Held{};
  return Waiting{milliseconds(0), 0, true};
}

std::optional<Held> ConditionAttempt::await(const WaitState& /*state*/, const Pause& pause) {
  const Grant heard = signals_->waitForGrant(pause.sleep);
  if (heard.kind != Grant::Kind::Granted) return std::nullopt;  // the pause ended, or a recheck is due: try
  signalled_ = true;
  return Held{};
}

void ConditionAttempt::leave(const WaitState& state) noexcept {
  if (!state.leftOnServer || refused_ || !parts_.joined.sent) return;
  // Out of the condition (and, once signalled, a fair key's queue): within the wait's budget, else
  // on the cleanup lane. A place that cannot be removed ends with its waiter lease.
  const std::shared_ptr<IOperator> keepAlive = tools_.backend;  // owns the condition operator
  tools_.cleanup->runWithin(CallBudget::current(), [keepAlive, conditions = &parts_.conditions,
                                                   key = std::string(tools_.key), name = std::string(parts_.name),
                                                   token = parts_.given.token, ttl = parts_.given.ttl,
                                                   waiterLease = parts_.waiterLease,
                                                   signalled = parts_.joined.signalledBeforeLeave]() noexcept {
    try {
      if (!conditions->leaveCondition(key, name, token, ttl)) signalled->store(true);
      return true;
    } catch (const std::exception& error) {
      try {
        logger()->debug("dlock: leaving the condition {} of {} failed ({}); the place ends within {} ms",
                        quoteText(name, 40), quoteKey(key), error.what(), waiterLease.count());
      } catch (...) {
      }
      return false;
    }
  }, "leaving the condition " + quoteText(parts_.name, 40) + " of " + quoteKey(tools_.key));
}

}  // namespace dlock::detail
