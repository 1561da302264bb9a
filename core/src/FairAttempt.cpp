// SPDX-License-Identifier: Apache-2.0
#include "FairAttempt.h"

#include "GrantClaim.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Token.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using std::chrono::milliseconds;

FairAttempt::FairAttempt(const AttemptTools& tools, FairBackend& fair, milliseconds waiterLease, std::string token)
    : tools_(tools),
      fair_(fair),
      waiterLease_(waiterLease),
      token_(token.empty() ? generateToken() : std::move(token)),
      // A key waited for lately: listen before the first try, so a queued try needs no second.
      listenFirst_(waiterLease_.count() > 0 && fair_.contended().lately(tools_.key)) {}

TryResult FairAttempt::tryAcquire(const WaitState& state) {
  askAgain_ = false;
  if (listenFirst_) {
    listenFirst_ = false;
    try {
      grants_ = fair_.queue().watchGrants(tools_.key, token_);
    } catch (const LockError& error) {
      // join() subscribes again, or the try below meets the trouble.
      logger()->debug("dlock: listening for a hand-off of {} failed: {}", quoteKey(tools_.key), error.what());
    }
  }
  const Clock::time_point sentAt = tools_.clock.now();
  const FairAcquireResult result = fair_.queue().fairLock(tools_.key, token_, tools_.ttl, waiterLease_);
  if (result.acquired) {
    // Ours at `sentAt` for `validFor`, the server says. A claim shorter than the ttl is extended
    // first; if the extend gets no answer, the claim stands and the watchdog renews it before it
    // ends (the lease's deadline is nearer than its next tick).
    const milliseconds validFor = knownValidity(result.validity, tools_.ttl);
    if (validFor >= tools_.ttl) return Held{result.fencingToken, sentAt, validFor};
    Clock::time_point extendSent;
    const std::optional<bool> ours = extendClaim(extendSent);
    if (!ours) return Held{result.fencingToken, sentAt, validFor};
    if (*ours) return Held{result.fencingToken, extendSent, tools_.ttl};
    // The claim ended between the two calls: ask again at once (join), as one still waiting.
    askAgain_ = true;
    return Waiting{milliseconds(0), state.last.backendMillis, true};
  }
  const bool queued = waiterLease_.count() > 0;
  if (queued) fair_.contended().note(tools_.key);
  return Waiting{result.holderTtl, result.backendMillis, queued};
}

std::optional<bool> FairAttempt::extendClaim(Clock::time_point& sentAt) {
  sentAt = tools_.clock.now();
  try {
    return tools_.backend->extend(tools_.key, token_, tools_.ttl);
  } catch (const ConnectionError& error) {
    logger()->debug("dlock: extending the claim on {} failed: {}", quoteKey(tools_.key), error.what());
    return std::nullopt;
  }
}

bool FairAttempt::join(const WaitState& /*state*/) {
  if (askAgain_) return true;
  if (grants_) return false;
  grants_ = fair_.queue().watchGrants(tools_.key, token_);
  return true;  // listening only from now: ask again, or a hand-off in between goes unheard
}

std::optional<Held> FairAttempt::await(const WaitState& state, const Pause& pause) {
  return confirmedGrant(*grants_, state, pause, tools_, [this](Clock::time_point& sentAt) { return extendClaim(sentAt); });
}

void FairAttempt::leave(const WaitState& state) noexcept {
  if (!state.leftOnServer) return;  // never queued, and no try left in doubt
  leaveFairQueue(tools_, fair_, token_, waiterLease_, CallBudget::current());
}

void leaveFairQueue(const AttemptTools& tools, FairBackend& fair, const std::string& token,
                    std::chrono::milliseconds waiterLease, CallBudget::TimePoint deadline) noexcept {
  // Out of the queue for good: now within `deadline`, else on the cleanup lane. A place that
  // cannot be removed ends with its waiter lease. `backend` (the fair backend itself) keeps
  // `fair` alive on the lane.
  tools.cleanup->runWithin(deadline, [backend = tools.backend, fair = &fair, key = std::string(tools.key), token,
                                      ttl = tools.ttl, waiterLease]() noexcept {
    try {
      if (fair->queue().leaveQueue(key, token, ttl)) {
        logger()->debug("dlock: {} was handed over as the wait for it ended; passed on", quoteKey(key));
      }
      return true;
    } catch (const std::exception& error) {
      try {
        logger()->debug("dlock: leaving the queue of {} failed ({}); the place ends within {} ms", quoteKey(key),
                        error.what(), waiterLease.count());
      } catch (...) {
      }
      return false;
    }
  }, "leaving the queue of " + quoteKey(tools.key) + " on " + tools.backend->describe());
}

}  // namespace dlock::detail
