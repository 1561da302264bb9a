// SPDX-License-Identifier: Apache-2.0
#include "PermitAttempt.h"

#include "GrantClaim.h"
#include "LeaseState.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Token.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using std::chrono::milliseconds;

PermitAttempt::PermitAttempt(const AttemptTools& tools, PermitBackend& permits, std::uint32_t count,
                             milliseconds waiterLease)
    : tools_(tools), permits_(permits), count_(count), waiterLease_(waiterLease), token_(generateToken()) {}

TryResult PermitAttempt::tryAcquire(const WaitState& state) {
  askAgain_ = false;
  const Clock::time_point sentAt = tools_.clock.now();
  const SemaphoreAcquireResult result = permits_.semaphores().acquirePermits(
      tools_.key, token_, count_, permits_.capacity(), tools_.ttl, waiterLease_);
  if (result.acquired) return claimed(result.fencingToken, sentAt, result.validity, state);
  if (waiterLease_.count() > 0 && result.position == 0) {
    // Refused: the token was spent (a leave of ours landed late). Nothing is held on it: ask anew.
    token_ = generateToken();
    grants_.reset();
  }
  return Waiting{result.nextExpiry, result.backendMillis, result.position > 0};
}

TryResult PermitAttempt::claimed(std::uint64_t fencingToken, Clock::time_point sentAt, milliseconds validity,
                                 const WaitState& state) {
  // Ours at `sentAt` for `validFor`, the server says. A claim shorter than the lease (a grant
  // found by a try) is extended first; unanswered, the claim stands and the watchdog renews it
  // before it ends.
  const milliseconds validFor = knownValidity(validity, tools_.ttl);
  if (validFor >= tools_.ttl) return Held{fencingToken, sentAt, validFor};
  Clock::time_point extendSent;
  const std::optional<bool> ours = extendClaim(extendSent);
  if (!ours) return Held{fencingToken, sentAt, validFor};
  if (*ours) return Held{fencingToken, extendSent, tools_.ttl};
  askAgain_ = true;  // the claim ended between the two calls: ask again at once, as one still waiting
  return Waiting{milliseconds(0), state.last.backendMillis, true};
}

std::optional<bool> PermitAttempt::extendClaim(Clock::time_point& sentAt) {
  sentAt = tools_.clock.now();
  try {
    return permits_.semaphores().extendPermits(tools_.key, token_, tools_.ttl);
  } catch (const ConnectionError& error) {
    logger()->debug("dlock: extending the permits of {} failed: {}", quoteKey(tools_.key), error.what());
    return std::nullopt;
  }
}

bool PermitAttempt::join(const WaitState& /*state*/) {
  if (askAgain_) return true;
  if (grants_) return false;
  grants_ = permits_.semaphores().watchPermitGrants(tools_.key, token_);
  return true;  // listening only from now: ask again, or a grant in between goes unheard
}

std::optional<Held> PermitAttempt::await(const WaitState& state, const Pause& pause) {
  return confirmedGrant(*grants_, state, pause, tools_, [this](Clock::time_point& sentAt) { return extendClaim(sentAt); });
}

void PermitAttempt::leave(const WaitState& state) noexcept {
  if (!state.leftOnServer) return;  // never queued, and no try left in doubt
  // Out of the queue for good, releasing permits granted meanwhile (or taken by a try whose reply
  // was lost): now within the wait's budget, else on the cleanup lane. A place that cannot be
  // removed ends with its waiter lease, permits with their lease. `backend` keeps `permits` alive.
  tools_.cleanup->runWithin(CallBudget::current(), [backend = tools_.backend, permits = &permits_,
                                                   name = std::string(tools_.key), token = token_,
                                                   ttl = tools_.ttl]() noexcept {
    try {
      if (permits->semaphores().leavePermitQueue(name, token)) {
        logger()->debug("dlock: permits of {} granted as the wait for them ended were released", quoteKey(name));
      }
      return true;
    } catch (const std::exception& error) {
      try {
        logger()->debug("dlock: leaving the permit queue of {} failed ({}); what it holds ends within {} ms",
                        quoteKey(name), error.what(), ttl.count());
      } catch (...) {
      }
      return false;
    }
  }, "leaving the permit queue of " + quoteKey(tools_.key) + " on " + tools_.backend->describe());
}

}  // namespace dlock::detail
