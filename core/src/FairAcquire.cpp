// SPDX-License-Identifier: Apache-2.0
// LockCore::acquireFair — the wait of a fair lock. Each waiting thread holds its own place in the
// backend's queue (threads of one process queue there too, so the order is one across processes
// and threads), listens for its own hand-off, and renews its place every third of the waiter
// lease by asking again: the same idempotent attempt finds a hand-off whose message was lost, and
// a waiter that died stops renewing and is skipped once its lease ends (handed the key just
// before, it holds it for a claim lease no longer than its place had left; a live heir extends
// the claim to its ttl at once). A waiter that gives up
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
  IFairOperator& queue = fair_->queue();
  const bool once = deadline == kTryOnce;
  const milliseconds waiterLease = once ? milliseconds(0) : options_.waiterLease;
  std::unique_ptr<IGrantWatch> grants;
  bool queued = false;
  // The last attempt that found us waiting: sent at `anchorLocal` (our clock), run at
  // `anchorBackend` (the backend's, ms). A hand-off comes after it, so its backend time maps onto
  // our clock no later than it happened: the lease's local deadline errs on the early side.
  Clock::time_point anchorLocal{};
  std::int64_t anchorBackend = 0;
  std::optional<SteadyTime> waitingSince;
  std::optional<OutageRetry> outage;

  const auto stopWaiting = [&] {
    if (!waitingSince) return;
    counters_->waitMillis.fetch_add(
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - *waitingSince).count(),
        std::memory_order_relaxed);
  };
  // Ours, valid until `validUntil`; held for less than the ttl (a claim lease), extended first.
  const auto granted = [&](std::uint64_t fence, Clock::time_point validUntil, milliseconds validFor) {
    if (validFor < ttl) {
      const Clock::time_point extendSent = clock_->now();
      try {
        if (backend_->extend(key, token, ttl)) validUntil = extendSent + ttl;
      } catch (const std::exception& error) {
        // The claim lease holds meanwhile; the watchdog or the holder's unlock meets the trouble.
        log_->debug("dlock: extending the claim on {} failed: {}", quoteKey(key), error.what());
      }
    }
    stopWaiting();
    counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
    auto lease = std::make_shared<LeaseState>(std::string(key), token, fence, ttl, renewed, validUntil);
    if (renewed) watchdog_->add(lease);
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("dlock: acquired {} on {} (fair, fencing token {})", quoteKey(key), backend_->describe(), fence);
    }
    return lease;
  };
  // Out of the queue for good, best effort: a place we cannot remove ends with its waiter lease.
  const auto leave = [&]() noexcept {
    if (!queued) return;  // never queued, and no attempt left in doubt
    try {
      if (queue.leaveQueue(key, token, ttl)) {
        log_->debug("dlock: {} was handed over as the wait for it ended; passed on", quoteKey(key));
      }
    } catch (const std::exception& error) {
      try {
        log_->debug("dlock: leaving the queue of {} failed ({}); the place ends within {} ms", quoteKey(key),
                    error.what(), options_.waiterLease.count());
      } catch (...) {
      }
    }
  };
  const auto rideOut = [&](const ConnectionError& error) {
    if (!outage) outage.emplace(deadline, options_.outageTolerance);
    try {
      outage->pauseOrThrow(error, "dlock: lock " + quoteKey(key) + " on " + backend_->describe());
    } catch (...) {
      leave();
      throw;
    }
    counters_->outageRetries.fetch_add(1, std::memory_order_relaxed);
  };

  // A key waited for lately: listen before the first attempt, so a queued attempt needs no second.
  if (!once && fair_->contended().lately(key)) {
    try {
      grants = queue.watchGrants(key, token);
    } catch (const LockError& error) {
      logFailedAttempt(key, error);  // the wait below subscribes again, or meets the trouble
    }
  }

  while (true) {
    const Clock::time_point sentAt = clock_->now();
    FairAcquireResult result;
    counters_->attempts.fetch_add(1, std::memory_order_relaxed);
    try {
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
      const milliseconds validFor = knownValidity(result.validity, ttl);
      return granted(result.fencingToken, sentAt + validFor, validFor);
    }
    queued = !once;
    if (queued) fair_->contended().note(key);
    anchorLocal = sentAt;
    anchorBackend = result.backendMillis;
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
    const Grant grant = grants->waitForGrant(std::max(wait, milliseconds(1)));
    if (grant.kind == Grant::Kind::Granted) {
      const milliseconds since(std::max<std::int64_t>(0, grant.backendMillis - anchorBackend));
      return granted(grant.fencingToken, anchorLocal + since + grant.lease, grant.lease);
    }
  }
}

}  // namespace dlock::detail
