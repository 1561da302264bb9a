// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/Condition.h"

#include <utility>

#include "ConditionAttempt.h"
#include "LockCore.h"
#include "dlock/IConditionOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/RequestIdHolder.h"

namespace dlock {

Condition::Condition(std::shared_ptr<detail::LockCore> core, std::string key, std::string name)
    : core_(std::move(core)), key_(std::move(key)), name_(std::move(name)) {}

bool Condition::awaitFor(std::chrono::milliseconds timeout, const CancelToken& cancel) {
  if (timeout.count() <= 0) return wait(Deadline::min(), cancel);
  const auto now = std::chrono::steady_clock::now();
  if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now)) {
    return wait(Deadline::max(), cancel);
  }
  return wait(now + timeout, cancel);
}

namespace {

// The hold `lease` (of `count` holds) of this thread, given up by an await, taken again: the same
// token when the fair lock's queue holds the signalled waiter's place.
void takeAgain(detail::LockCore& core, const std::string& key, const detail::LeaseState& lease, unsigned count,
               bool signalled) {
  const bool sameToken = signalled && core.capabilities().fair != nullptr;
  std::shared_ptr<detail::LeaseState> again =
      core.reacquire(key, lease.renewed ? std::nullopt : std::optional<std::chrono::milliseconds>(lease.ttl),
                     sameToken ? lease.token : std::string());
  core.keep(again);  // InterruptedError, released first, when the lock was closed meanwhile
  RequestIdHolder::insert(core.id(), key, std::move(again)).count = count;
}

// The hold `lease` after an await that gave the key up and that the lock's close() ended before
// the key was taken again: the thread's record stays, so that its unlock (a guard's) ends it, but
// it holds nothing (LeasePhase::Yielded): isHeld false, unlock silent.
[[noreturn]] void throwClosedUnheld(detail::LockCore& core, const std::string& key,
                                    const std::shared_ptr<detail::LeaseState>& lease, unsigned count,
                                    const std::string& what) {
  lease->setDeadline(Clock::time_point{});
  RequestIdHolder::insert(core.id(), key, lease).count = count;
  throw InterruptedError(what + ": the lock was closed; the key is not held");
}

// takeAgain, or, when close() ends it (the key not taken again), throwClosedUnheld.
void retake(detail::LockCore& core, const std::string& key, const std::shared_ptr<detail::LeaseState>& lease,
            unsigned count, bool signalled, const std::string& what) {
  try {
    takeAgain(core, key, *lease, count, signalled);
  } catch (const InterruptedError&) {
    if (!core.closed()) throw;
    throwClosedUnheld(core, key, lease, count, what);
  }
}

// This thread's hold of `key`; NotOwnerError, naming `operation`, when it has none.
RequestIdHolder::Hold& holdOf(const detail::LockCore& core, const std::string& key, const char* operation) {
  RequestIdHolder::Hold* hold = RequestIdHolder::find(core.id(), key);
  if (hold == nullptr) {
    throw NotOwnerError(std::string("dlock: ") + operation + " " + detail::quoteKey(key) + " on " + core.describe() +
                        ": the key is not held by this thread");
  }
  return *hold;
}

// The wait on the condition (ConditionAttempt) in the lock's wait loop: Held once signalled.
std::optional<detail::Held> waitForSignal(detail::LockCore& core, const std::string& key, const std::string& name,
                                          const detail::LeaseState& lease, ILock::Deadline deadline,
                                          const CancelToken& cancel, detail::ConditionAttempt::Joined& joined) {
  const detail::LockCapabilities& capabilities = core.capabilities();
  const detail::ConditionAttempt::Parts parts{*capabilities.condition,
                                              capabilities.conditionLock,
                                              capabilities.fair.get(),
                                              name,
                                              lease,
                                              core.options().waiterLease,
                                              joined,
                                              [&core](std::shared_ptr<detail::LeaseState> place) {
                                                core.keepPlace(std::move(place));
                                              }};
  return core.waitBy(key, deadline, lease.ttl, cancel,
                       [&parts](const detail::AttemptTools& tools, const detail::WaitPolicy& /*policy*/) {
                         return std::make_unique<detail::ConditionAttempt>(tools, parts);
                       });
}

}  // namespace

bool Condition::wait(Deadline deadline, const CancelToken& cancel) {
  const std::string what = "dlock: await " + detail::quoteKey(key_) + " on " + core_->describe();
  if (cancel.cancelRequested()) throw InterruptedError(what + ": cancelled before it began; the key is still held");
  if (core_->closed()) core_->throwClosed("await " + detail::quoteKey(key_));
  RequestIdHolder::Hold& hold = holdOf(*core_, key_, "await");
  const std::shared_ptr<detail::LeaseState> lease = hold.lease;  // outlives the hold record
  const unsigned count = hold.count;
  if (!core_->isValid(*lease) || !lease->transition(detail::LeasePhase::Held, detail::LeasePhase::Releasing)) {
    throw LockLostError(what + ": the lease had ended; nothing was joined");
  }
  if (deadline == Deadline::min()) {  // no time to wait: the hold checked, nothing sent
    lease->transition(detail::LeasePhase::Releasing, detail::LeasePhase::Held);
    return false;
  }
  // The hold (watchdog, kept holds, this thread's record) ends when the await script joins: from
  // then on the key is not this thread's until it is taken again.
  detail::ConditionAttempt::Joined joined;
  joined.onJoined = [&] {
    lease->transition(detail::LeasePhase::Releasing, detail::LeasePhase::Yielded);
    core_->forget(*lease);
    RequestIdHolder::erase(core_->id(), key_);
  };
  // Not joined: the hold stays this thread's when no await was sent. One whose answer never came
  // may still run and give the key up: the hold is lost (unlock: LockLostError), never reported held.
  const auto keepUnjoined = [&] {
    if (!joined.sent) {
      lease->transition(detail::LeasePhase::Releasing, detail::LeasePhase::Held);
    } else {
      core_->giveUpInDoubt(*lease, detail::LeasePhase::Releasing, "a Condition's await was cut off");
    }
  };
  std::optional<detail::Held> signalled;
  try {
    signalled = waitForSignal(*core_, key_, name_, *lease, deadline, cancel, joined);
  } catch (const InterruptedError&) {
    if (!joined.joined) {
      keepUnjoined();
      throw;
    }
    if (core_->closed()) throwClosedUnheld(*core_, key_, lease, count, what);
    retake(*core_, key_, lease, count, false, what);  // the JDK re-acquires before throwing too
    // Signalled before the cancel: a return, as the JDK's await returns when interrupted after its
    // signal, so the signal is not lost to the other waiters; the cancelled token ends the next wait.
    if (joined.signalledBeforeLeave->load()) return true;
    throw InterruptedError(what + ": cancelled; the condition was left and the key is held again");
  } catch (const LockLostError&) {
    if (!joined.joined && lease->transition(detail::LeasePhase::Releasing, detail::LeasePhase::Lost)) {
      core_->counters().lostLeases.fetch_add(1, std::memory_order_relaxed);
    }
    throw;
  } catch (...) {
    if (!joined.joined) keepUnjoined();
    throw;
  }
  retake(*core_, key_, lease, count, signalled.has_value(), what);
  // Timed out, but signalled before it left: the signal was this waiter's, not lost.
  return signalled.has_value() || joined.signalledBeforeLeave->load();
}

void Condition::signal(bool all) {
  const char* operation = all ? "signalAll" : "signal";
  const detail::LeaseState& lease = *holdOf(*core_, key_, operation).lease;
  const detail::LockCapabilities& capabilities = core_->capabilities();
  IConditionOperator& conditions = *capabilities.condition;
  const SignalResult result = all ? conditions.signalAll(key_, name_, lease.token, capabilities.conditionLock)
                                  : conditions.signal(key_, name_, lease.token, capabilities.conditionLock);
  if (!result.owner) {
    throw NotOwnerError(std::string("dlock: ") + operation + " " + detail::quoteKey(key_) + " on " + core_->describe() +
                        ": this thread's lease of the key has ended; nothing was signalled");
  }
}

}  // namespace dlock
