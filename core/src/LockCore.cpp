// SPDX-License-Identifier: Apache-2.0
#include "LockCore.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <utility>

#include "OutageRetry.h"
#include "OwnerLabel.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Token.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

std::uint64_t nextLockId() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

milliseconds remainingUntil(ILock::Deadline deadline, SteadyTime now) {
  if (deadline == ILock::Deadline::max()) return milliseconds::max();
  if (now >= deadline) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(deadline - now);
}

}  // namespace

LockCore::LockCore(std::shared_ptr<IOperator> backend, LockCapabilities capabilities, std::shared_ptr<IWait> wait,
                   std::shared_ptr<Clock> clock, LockOptions options)
    : id_(nextLockId()),
      backend_(std::move(backend)),
      capabilities_(std::move(capabilities)),
      wait_(std::move(wait)),
      clock_(std::move(clock)),
      options_(std::move(options)),
      log_(logger()),
      counters_(std::make_shared<LockCounters>()),
      waiters_([] { return std::make_shared<WaiterQueue>(); }),
      contended_([] { return std::make_shared<ContendedReleases>(); }),
      cleanup_([] { return std::make_shared<CleanupLane>(); }),
      watchdog_([this] { return makeWatchdog(); }) {}

LockCore::~LockCore() {
  watchdog_->stop();
  cleanup_->stop();
}

AcquireResult LockCore::attempt(std::string_view key, const std::string& token, milliseconds ttl) {
  const std::uint64_t number = counters_->attempts.fetch_add(1, std::memory_order_relaxed);
  // The round trip only sizes the yield after a contended release, so one attempt in
  // kRoundTripSampling is timed: two clock reads are a tenth of the memory backend's cycle.
  const bool timed = number % ContendedReleases::kRoundTripSampling == 0;
  try {
    const SteadyTime start = timed ? std::chrono::steady_clock::now() : SteadyTime{};
    AcquireResult result = capabilities_.ownerRecorder
                               ? capabilities_.ownerRecorder->lockRecordingOwner(key, token, ttl, ownerLabel(*options_.ownerLabel))
                               : backend_->lock(key, token, ttl);
    if (timed) contended_->sampleRoundTrip(std::chrono::steady_clock::now() - start);
    if (!result.acquired && log_->should_log(spdlog::level::debug)) {
      log_->debug("dlock: {} on {} is held by another owner for {} ms more", quoteKey(key), backend_->describe(),
                  result.holderTtl.count());
    }
    return result;
  } catch (const std::exception& error) {
    logFailedAttempt(key, error);
    // Any failure may come after the key was set: the command landed before its connection
    // failed, or a later step of the acquire was refused (Sentinel's WAIT); or it may land later
    // still, queued on a busy server behind this cancel. Cancel the token: the key is deleted if
    // it carries it, and an acquire with it arriving later is refused; the caller's next attempt
    // uses a new token. If the cancel fails too, the lease, if any, ends at its TTL.
    cleanup_->runWithin(CallBudget::current(), [backend = backend_, log = log_, key = std::string(key), token, ttl]() noexcept {
      try {
        (void)backend->cancel(key, token);
        return true;
      } catch (...) {
        try {
          log->debug("dlock: could not clean up {} after a failed acquire; the lease, if any, ends in {} ms",
                     quoteKey(key), ttl.count());
        } catch (...) {
        }
        return false;
      }
    });
    throw;
  }
}

void LockCore::logFailedAttempt(std::string_view key, const std::exception& error) const {
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("dlock: acquiring {} on {} failed: {}", quoteKey(key), backend_->describe(), error.what());
  }
}

std::shared_ptr<LeaseState> LockCore::acquire(std::string_view key, Deadline deadline,
                                              std::optional<milliseconds> leaseTime) {
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  std::string token = generateToken();
  if (capabilities_.fair) return acquireFair(key, token, ttl, renewed, deadline);

  if (deadline != kTryOnce) yieldAfterContendedRelease(key, deadline);

  std::unique_ptr<IReleaseWatch> releases;
  std::optional<WaiterQueue::Ticket> ticket;
  std::optional<SteadyTime> waitingSince;
  const auto stopWaiting = [&](SteadyTime now) {
    if (waitingSince) {
      counters_->waitMillis.fetch_add(std::chrono::duration_cast<milliseconds>(now - *waitingSince).count(),
                                      std::memory_order_relaxed);
    }
  };
  const auto timedOut = [&]() -> std::shared_ptr<LeaseState> {
    stopWaiting(std::chrono::steady_clock::now());
    counters_->failedTries.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  };

  // A ConnectionError inside a wait is retried within the wait's budget (see OutageRetry.h);
  // tryLock(key), which tries once, throws at once.
  std::optional<OutageRetry> outage;
  SteadyTime attemptSent;  // of the attempt whose failure is being ridden out
  const auto rideOut = [&](const ConnectionError& error) {
    if (deadline == kTryOnce) throw;
    if (!outage) outage.emplace(deadline, options_.outageTolerance, attemptSent);
    outage->pauseOrThrow(error, "dlock: lock " + quoteKey(key) + " on " + backend_->describe());
    counters_->outageRetries.fetch_add(1, std::memory_order_relaxed);
    if (log_->should_log(spdlog::level::debug)) {
      log_->debug("dlock: retrying {} on {} after: {}", quoteKey(key), backend_->describe(), error.what());
    }
  };

  for (unsigned failures = 0;;) {
    const Clock::time_point sentAt = clock_->now();
    attemptSent = std::chrono::steady_clock::now();
    AcquireResult result;
    try {
      const CallBudget budget(callDeadline(deadline, outage));
      result = attempt(key, token, ttl);
    } catch (const ConnectionError& error) {
      rideOut(error);
      token = generateToken();  // the failed attempt's token was cancelled
      continue;
    }
    outage.reset();  // answered: a later outage gets a budget of its own
    if (result.acquired) {
      if (waitingSince) stopWaiting(std::chrono::steady_clock::now());
      counters_->acquisitions.fetch_add(1, std::memory_order_relaxed);
      auto lease = std::make_shared<LeaseState>(std::string(key), std::move(token), result.fencingToken, ttl, renewed,
                                                sentAt + knownValidity(result.validity, ttl));
      if (renewed) watchdog_->add(lease);
      if (log_->should_log(spdlog::level::debug)) {
        log_->debug("dlock: acquired {} on {} (fencing token {})", quoteKey(key), backend_->describe(),
                    result.fencingToken);
      }
      return lease;
    }
    ++failures;
    const SteadyTime now = std::chrono::steady_clock::now();
    if (!waitingSince) waitingSince = now;
    if (deadline == kTryOnce || now >= deadline) return timedOut();
    if (!ticket) {
      // Queue behind this process's other waiters for the key; only the head talks to the backend.
      ticket.emplace(*waiters_, key);
      if (!ticket->waitForTurn(deadline)) return timedOut();
      continue;  // our turn: the key may be free by now
    }
    if (!releases && wait_->wantsReleaseWatch()) {
      try {
        attemptSent = std::chrono::steady_clock::now();
        const CallBudget budget(callDeadline(deadline, outage));
        releases = backend_->watch(key);
      } catch (const ConnectionError& error) {
        rideOut(error);
        continue;
      }
      // Subscribed after the failed attempt: try again at once, or a release in between is missed.
      if (releases) continue;
    }
    WaitContext context;
    context.key = key;
    context.attempt = failures;
    context.remaining = remainingUntil(deadline, now);
    context.holderTtl = result.holderTtl;
    context.waitingSince = *waitingSince;
    context.releases = releases.get();
    wait_->wait(context);
  }
}

void LockCore::release(LeaseState& lease) {
  if (lease.inheritedAcrossFork()) throwInherited(lease);
  // Lost or past its deadline, as isHeld() says: the section was not protected to the end,
  // unless the server shows that an earlier try of this release ran while the key was ours.
  const bool valid = isValid(lease);
  const LeasePhase from = lease.phase();
  if (!lease.transition(from, LeasePhase::Releasing)) {
    // Lost (the watchdog told of it first) or given up. The key may still carry our token (its
    // renewals failed): delete it if so, so others need not wait out the TTL. Best effort.
    try {
      (void)backend_->unlock(lease.key, lease.token);
    } catch (const std::exception&) {
    }
    throwLost(lease, false, "was lost while held");
  }
  ReleaseResult result;
  try {
    result = backend_->unlock(lease.key, lease.token);
  } catch (const ConnectionError&) {
    if (!valid) throwLost(lease, true, "had ended, and its release could not reach the server");
    // The release may have run before the connection failed: the next try asks the server.
    lease.transition(LeasePhase::Releasing, LeasePhase::InDoubt);
    throw;
  } catch (...) {
    if (!valid) throwLost(lease, true, "had ended");
    // Refused (an error reply): nothing ran. An earlier cut-off try still may have.
    lease.transition(LeasePhase::Releasing, from);
    throw;
  }
  const bool clean = result.releasedEarlier || (result.released && valid);
  if (!clean) {
    throwLost(lease, true, result.released ? "had ended before unlock" : "had expired or was taken");
  }
  lease.transition(LeasePhase::Releasing, LeasePhase::Released);
  if (result.notified > 0) contended_->note(lease.key);
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("dlock: released {} on {}{}", quoteKey(lease.key), backend_->describe(),
                result.releasedEarlier ? " (by an earlier try whose reply was lost)" : "");
  }
}

void LockCore::throwLost(LeaseState& lease, bool releasing, const char* what) {
  // Counted once per lease: by whoever moved it to Lost (the watchdog, or this release).
  if (releasing && lease.transition(LeasePhase::Releasing, LeasePhase::Lost)) {
    counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
  }
  throw LockLostError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() + ": the lease " +
                      what + " (fencing token " + std::to_string(lease.fencingToken) +
                      "); the critical section was not protected");
}

bool LockCore::releaseQuietly(LeaseState& lease) noexcept {
  if (lease.inheritedAcrossFork()) return false;  // the parent's to release, not ours
  try {
    release(lease);
    return true;
  } catch (const LockLostError& error) {
    // Nobody hears of it but the log (and stats(), counted already).
    try {
      log_->warn("{}", error.what());
    } catch (...) {
    }
  } catch (const std::exception& error) {
    lease.abandon();
    try {
      log_->warn("dlock: releasing {} failed: {}; the lease ends on its own within {} ms", quoteKey(lease.key),
                 error.what(), lease.ttl.count());
    } catch (...) {
    }
  } catch (...) {
    lease.abandon();
  }
  return false;
}

void LockCore::throwInherited(const LeaseState& lease) const {
  throw NotOwnerError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() +
                      ": acquired by the parent process before fork(); only the parent can release it");
}

void LockCore::yieldAfterContendedRelease(std::string_view key, Deadline deadline) {
  const std::optional<SteadyTime> until = contended_->take(key);
  if (!until) return;
  const SteadyTime end = std::min(*until, deadline);
  if (end > std::chrono::steady_clock::now()) std::this_thread::sleep_until(end);
}

std::shared_ptr<Watchdog> LockCore::makeWatchdog() {
  auto watchdog = std::make_shared<Watchdog>(backend_, clock_, options_.watchdogLease, counters_);
  // A forked child makes its own watchdog: it reports to the handler the lock was given.
  std::lock_guard<ForkSafeMutex> guard(handlerMutex_);
  if (lostHandler_) watchdog->setLostHandler(lostHandler_);
  return watchdog;
}

void LockCore::setLostHandler(ILock::LostHandler handler) {
  // First, outside the mutex: a forked child's first use makes its watchdog, which takes it.
  Watchdog& watchdog = *watchdog_;
  std::lock_guard<ForkSafeMutex> guard(handlerMutex_);
  lostHandler_ = handler;
  watchdog.setLostHandler(std::move(handler));
}

}  // namespace dlock::detail
