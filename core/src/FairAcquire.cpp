// SPDX-License-Identifier: Apache-2.0
// LockCore::acquireFair — the wait of a fair lock. Each waiting thread holds its own place in the
// backend's queue (threads of one process queue there too, so the order is one across processes
// and threads), listens for its own hand-off, and renews its place every third of the waiter
// lease by asking again: the same idempotent attempt finds a hand-off whose message was lost, and
// a waiter that died stops renewing and is skipped once its lease ends (handed the key just
// before, it holds it for a claim lease no longer than its place had left).
//
// A hand-off counts only on the server's word at that moment (DESIGN.md, "Grants and messages"):
// the heir extends its claim to its ttl, and only an extend that finds the key still this token's
// makes it the holder. A waiter paused past its claim, whose key someone else took meanwhile, is
// told "not ours" and asks again, queueing anew. A message never outlives the attempt it answered:
// one older than the last attempt that found us waiting is dropped unread. A waiter that gives up
// (its timeout, an error) leaves the queue; a hand-off that raced it is passed on by that leave.
#include <algorithm>
#include <optional>

#include "LockCore.h"
#include "OutageRetry.h"
#include "dlock/IFairOperator.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

milliseconds remainingUntil(ILock::Deadline deadline, SteadyTime now) {
  if (deadline == ILock::Deadline::max()) return milliseconds::max();
  if (now >= deadline) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(deadline - now);
}

}  // namespace

std::shared_ptr<LeaseState> LockCore::acquireFair(std::string_view key, const std::string& token, milliseconds ttl,
                                                  bool renewed, Deadline deadline) {
  IFairOperator& queue = capabilities_.fair->queue();
  const bool once = deadline == kTryOnce;
  const milliseconds waiterLease = once ? milliseconds(0) : options_.waiterLease;
  std::unique_ptr<IGrantWatch> grants;
  bool queued = false;
  // The backend's clock (ms) at the last attempt that found us waiting: a hand-off before it
  // answered an earlier attempt, and that attempt's answer ("waiting") supersedes it.
  std::int64_t waitingSinceBackend = 0;
  std::optional<SteadyTime> waitingSince;
  std::optional<OutageRetry> outage;
  SteadyTime callSent;  // of the call whose failure is being ridden out

  const auto stopWaiting = [&] {
    if (!waitingSince) return;
    counters_->waitMillis.fetch_add(
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - *waitingSince).count(),
        std::memory_order_relaxed);
  };
  const auto holding = [&](std::uint64_t fence, Clock::time_point validUntil) {
    stopWaiting();
    counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
    auto lease = std::make_shared<LeaseState>(std::string(key), token, fence, ttl, renewed, validUntil);
    if (renewed) watchdog_->add(lease);
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("dlock: acquired {} on {} (fair, fencing token {})", quoteKey(key), backend_->describe(), fence);
    }
    return lease;
  };
  // Out of the queue for good: now within the wait's budget, else on the cleanup lane. A place
  // that cannot be removed ends with its waiter lease.
  const auto leave = [&]() noexcept {
    if (!queued) return;  // never queued, and no attempt left in doubt
    cleanup_->runWithin(callDeadline(deadline, outage),
            [fair = capabilities_.fair, backend = backend_, log = log_, key = std::string(key), token, ttl,
             waiterLease = options_.waiterLease]() noexcept {
              try {
                if (fair->queue().leaveQueue(key, token, ttl)) {
                  log->debug("dlock: {} was handed over as the wait for it ended; passed on", quoteKey(key));
                }
                return true;
              } catch (const std::exception& error) {
                try {
                  log->debug("dlock: leaving the queue of {} failed ({}); the place ends within {} ms", quoteKey(key),
                             error.what(), waiterLease.count());
                } catch (...) {
                }
                return false;
              }
            });
  };
  const auto rideOut = [&](const ConnectionError& error) {
    if (!outage) outage.emplace(deadline, options_.outageTolerance, callSent);
    try {
      outage->pauseOrThrow(error, "dlock: lock " + quoteKey(key) + " on " + backend_->describe());
    } catch (...) {
      leave();
      throw;
    }
    counters_->outageRetries.fetch_add(1, std::memory_order_relaxed);
  };
  // The claim of a hand-off extended to the ttl: the server's answer (is the key this token's
  // now?), or nullopt when none came. Sent at `sentAt` when answered yes.
  const auto extendClaim = [&](Clock::time_point& sentAt) -> std::optional<bool> {
    sentAt = clock_->now();
    try {
      const CallBudget budget(callDeadline(deadline, outage));
      return backend_->extend(key, token, ttl);
    } catch (const ConnectionError& error) {
      log_->debug("dlock: extending the claim on {} failed: {}", quoteKey(key), error.what());
      return std::nullopt;
    }
  };

  // A key waited for lately: listen before the first attempt, so a queued attempt needs no second.
  if (!once && capabilities_.fair->contended().lately(key)) {
    try {
      const CallBudget budget(callDeadline(deadline, outage));
      grants = queue.watchGrants(key, token);
    } catch (const LockError& error) {
      logFailedAttempt(key, error);  // the wait below subscribes again, or meets the trouble
    }
  }

  while (true) {
    const Clock::time_point sentAt = clock_->now();
    callSent = std::chrono::steady_clock::now();
    FairAcquireResult result;
    counters_->attempts.fetch_add(1, std::memory_order_relaxed);
    try {
      const CallBudget budget(callDeadline(deadline, outage));
      result = queue.fairLock(key, token, ttl, waiterLease);
    } catch (const ConnectionError& error) {
      logFailedAttempt(key, error);
      queued = true;  // it may have landed (or may land yet): queued us, or taken the key
      if (once) {
        leave();  // so a throwing tryLock holds nothing, and the attempt cannot land later
        throw;
      }
      rideOut(error);
      continue;
    } catch (const std::exception& error) {
      logFailedAttempt(key, error);
      queued = true;  // an error reply ran nothing, but an earlier try may have landed
      leave();
      throw;
    }
    outage.reset();
    if (result.acquired) {
      // Ours at `sentAt` for `validFor`, the server says. A claim shorter than the ttl is extended
      // first; if the extend gets no answer, the claim stands and the watchdog renews it before
      // it ends (the lease's deadline is nearer than its next tick).
      const milliseconds validFor = knownValidity(result.validity, ttl);
      if (validFor >= ttl) return holding(result.fencingToken, sentAt + validFor);
      Clock::time_point extendSent;
      const std::optional<bool> ours = extendClaim(extendSent);
      if (!ours) return holding(result.fencingToken, sentAt + validFor);
      if (*ours) return holding(result.fencingToken, extendSent + ttl);
      continue;  // the claim ended between the two calls: ask again
    }
    queued = !once;
    if (queued) capabilities_.fair->contended().note(key);
    waitingSinceBackend = result.backendMillis;
    const SteadyTime now = std::chrono::steady_clock::now();
    if (!waitingSince) waitingSince = now;
    if (once || now >= deadline) {
      leave();
      stopWaiting();
      counters_->failedTries.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    if (!grants) {
      try {
        callSent = std::chrono::steady_clock::now();
        const CallBudget budget(callDeadline(deadline, outage));
        grants = queue.watchGrants(key, token);
      } catch (const ConnectionError& error) {
        rideOut(error);
        continue;
      } catch (...) {
        leave();
        throw;
      }
      continue;  // listening only from now: ask again, or a hand-off in between goes unheard
    }
    // Renew our place every third of the waiter lease; wake when the holder's lease would end too
    // (it may have died holding the key: the next attempt hands the key to the queue's head).
    milliseconds wait = std::min(remainingUntil(deadline, now), options_.waiterLease / 3);
    if (result.holderTtl.count() > 0) wait = std::min(wait, result.holderTtl + milliseconds(1));
    Grant grant = grants->waitForGrant(std::max(wait, milliseconds(1)));
    while (grant.kind == Grant::Kind::Granted && grant.backendMillis < waitingSinceBackend) {
      grant = grants->waitForGrant(milliseconds(0));  // answered an earlier attempt: dropped
    }
    if (grant.kind != Grant::Kind::Granted) continue;
    // Handed to us, the message says; the key is ours only if the server says so now.
    Clock::time_point extendSent;
    const std::optional<bool> ours = extendClaim(extendSent);
    if (ours.value_or(false)) return holding(grant.fencingToken, extendSent + ttl);
    // Not ours (the claim ran out while we were away) or no answer: the next attempt asks again.
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("dlock: a hand-off of {} on {} was {}; asking again", quoteKey(key), backend_->describe(),
                  ours ? "no longer ours" : "not confirmed");
    }
  }
}

}  // namespace dlock::detail
