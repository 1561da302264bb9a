// SPDX-License-Identifier: Apache-2.0
#include "DefaultAttempt.h"

#include <algorithm>

#include "OwnerLabel.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Token.h"
#include "dlock/detail/Log.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

DefaultAttempt::DefaultAttempt(const AttemptTools& tools, const Parts& parts)
    : tools_(tools),
      parts_(parts),
      token_(generateToken()),
      listenFirst_(!parts.once && parts.wait.wantsReleaseWatch() && parts.contended.recent().lately(tools.key)) {}

AcquireResult DefaultAttempt::send() {
  return parts_.recorder != nullptr
             ? parts_.recorder->lockRecordingOwner(tools_.key, token_, tools_.ttl, ownerLabel(*parts_.ownerLabel))
             : tools_.backend->lock(tools_.key, token_, tools_.ttl);
}

TryResult DefaultAttempt::tryAcquire(const WaitState& state) {
  // The round trip only sizes the yield after a contended release, so only some tries are timed.
  if (cutOff_) {
    if (cancelOnLeave_) cancelCutOff();  // a cancel's cut-off whose leave never ran
    cancelOnLeave_ = false;
    token_ = generateToken();
    cutOff_ = false;
  }
  if (listenFirst_) {
    listenFirst_ = false;
    try {
      releases_ = tools_.backend->watch(tools_.key);
    } catch (const LockError& error) {
      // join() listens again, or the try below meets the trouble.
      logger()->debug("dlock: listening for a release of {} failed: {}", quoteKey(tools_.key), error.what());
    }
  }
  const bool timed = state.tryNumber % ContendedReleases::kRoundTripSampling == 0;
  const Clock::time_point sentAt = tools_.clock.now();
  AcquireResult result;
  try {
    const auto start = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    result = send();
    if (timed) parts_.contended.sampleRoundTrip(std::chrono::steady_clock::now() - start);
  } catch (...) {
    // Cut off by a cancel: the wait's leave gives the token back (WaitLoop::interrupted), outside
    // the cancelled wake-up; any other failure, now within the wait's budget.
    if (Wakeup::woken()) {
      cancelOnLeave_ = true;
    } else {
      cancelCutOff();
    }
    cutOff_ = true;
    throw;
  }
  if (result.acquired) return Held{result.fencingToken, sentAt, result.validity};
  if (!parts_.once) parts_.contended.recent().note(tools_.key);
  const Log log = logger();
  if (log->should_log(spdlog::level::debug)) {
    log->debug("dlock: {} on {} is held by another owner for {} ms more", quoteKey(tools_.key),
               tools_.backend->describe(), result.holderTtl.count());
  }
  return Waiting{result.holderTtl, 0, false};
}

void DefaultAttempt::cancelCutOff() {
  // Any failure may come after the key was set: the command landed before its connection failed,
  // or a later step of the acquire was refused (Sentinel's WAIT); or it may land later still,
  // queued on a busy server behind this cancel. Cancel the token: the key is deleted if it carries
  // it, and an acquire with it arriving later is refused. If the cancel fails too, the lease, if
  // any, ends at its TTL.
  tools_.cleanup->runWithin(CallBudget::current(), [backend = tools_.backend, key = std::string(tools_.key),
                                                   token = token_, ttl = tools_.ttl]() noexcept {
    try {
      (void)backend->cancel(key, token);
      return true;
    } catch (...) {
      try {
        logger()->debug("dlock: could not clean up {} after a failed acquire; the lease, if any, ends in {} ms",
                        quoteKey(key), ttl.count());
      } catch (...) {
      }
      return false;
    }
  }, "cancelling " + quoteKey(tools_.key) + " on " + tools_.backend->describe());
}

bool DefaultAttempt::join(const WaitState& /*state*/) {
  if (releases_ || !parts_.wait.wantsReleaseWatch()) return false;
  releases_ = tools_.backend->watch(tools_.key);
  // Subscribed after the last try: try again at once, or a release in between is missed.
  return releases_ != nullptr;
}

std::optional<Held> DefaultAttempt::await(const WaitState& state, const Pause& pause) {
  WaitContext context;
  context.key = tools_.key;
  context.attempt = state.failures;
  // Listening, the waiter is registered: it tries again within kRecheck (placeRenewal).
  context.remaining = releases_ ? std::min(pause.remaining, kRecheck) : pause.remaining;
  context.holderTtl = state.last.holderTtl;
  context.waitingSince = *state.waitingSince;
  context.releases = releases_.get();
  parts_.wait.wait(context);
  return std::nullopt;
}

}  // namespace dlock::detail
