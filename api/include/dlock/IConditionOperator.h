// SPDX-License-Identifier: Apache-2.0
// IConditionOperator.h — a backend that keeps conditions beside a lock's key: per key and
// condition name, the tokens waiting to be signalled, longest waiter first, each with a waiter
// lease in the backend's time (ConditionLock, AwaitResult, SignalResult, ConditionWaiter,
// ConditionInfo, IConditionOperator). What a Condition (java.util.concurrent.locks.Condition)
// needs; a backend without one store per key (Redlock: a quorum of independent servers) does not
// offer it.
//
//   await           `token` holds the key → in one step: joins the condition (its waiter lease from
//                   now) and releases the key as the lock's own release does (the exclusive lock's
//                   release message; the fair lock's hand-off to its queue's head), so no signal can
//                   fall between the release and the join; a retry whose first try ran → the same
//                   (awaitingEarlier; position 0 once signalled since, a hand-off to the token kept);
//                   not held → refused, nothing joined (the lock: LockLostError)
//   signal          `token` holds the key → skips the waiters whose lease ended, and moves the
//                   longest live waiter (every one: signalAll) to the key's wait: a fair key's queue
//                   tail, keeping the rest of its waiter lease, so a release hands it the key (as
//                   AQS moves a node); an exclusive key's waiter is told on its process's channel
//                   (watchSignals) to compete for it. Nobody waiting: nothing (not remembered).
//                   Not held → not the owner, nothing moved (the lock: NotOwnerError)
//   renewAwait      still on the condition → its waiter lease renewed; otherwise (signalled, or
//                   dropped once its lease ended) false: the waiter re-acquires. It is also the
//                   waiter's recheck, so a lost message is recovered at its next renewal
//   leaveCondition  out of the condition (a cancelled await); idempotent
//
// The caller says which lock holds the key (ConditionLock): it is chosen when the lock is built,
// and the backend cannot tell them apart (a fair key nobody queues for has no queue to find). A
// wrong one is safe but slow: the other lock's waiters find the key free at their next attempt.
// A waiter's token is the token of the hold it gave up: it re-acquires with it (a fair key is
// handed to it). Bad input (a key, name or token out of bounds, a bad lease) is an
// InvalidArgumentError before anything is sent. Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock {

// Longest condition name, in bytes (any bytes). Conditions are few per key and named by code.
inline constexpr std::size_t kMaxConditionNameBytes = 256;

// The lock whose key a condition's waiters gave up.
enum class ConditionLock : std::uint8_t {
  Exclusive,  // the default lock (IOperator): a release message; a signalled waiter competes
  Fair,       // the fair lock (IFairOperator): a hand-off; a signalled waiter joins the queue
};

// The outcome of one await.
struct AwaitResult {
  bool awaiting = false;  // false: `token` did not hold the key; nothing was joined or released
  // When awaiting: an earlier try of this await ran (its reply was lost), as the backend's record
  // shows; `position` 0 then says it has been signalled since.
  bool awaitingEarlier = false;
  // When awaiting now: as ReleaseResult::notified of the lock's release (subscribers reached, or 1
  // when a fair key was handed to a waiter).
  std::uint32_t notified = 0;
  std::uint32_t position = 0;  // the place on the condition, 1 is the longest waiter
};

// The outcome of one signal or signalAll.
struct SignalResult {
  bool owner = false;       // false: `token` does not hold the key; nothing was moved
  std::uint32_t moved = 0;  // waiters moved to the key's wait
};

// One waiter in a batch renewal. `ttl` as given to await.
struct ConditionWaiter {
  std::string_view key;
  std::string_view name;
  std::string_view token;
  std::chrono::milliseconds ttl{0};
};

// The waiters of one condition (inspectCondition), for diagnostics.
struct ConditionInfo {
  struct Waiter {
    std::string token;
    std::chrono::milliseconds remaining{0};  // of its waiter lease
  };
  std::vector<Waiter> waiters;  // live waiters, longest first
};

class IConditionOperator {
 public:
  IConditionOperator() = default;
  IConditionOperator(const IConditionOperator&) = delete;
  IConditionOperator& operator=(const IConditionOperator&) = delete;
  virtual ~IConditionOperator() = default;

  // See the table above. `fencingToken`: the one of the hold given up; on a fair key it tells a
  // retried try from a later hold of the same token (a hand-off after a signal), which a retry
  // must not release: it answers awaitingEarlier, position 0. `ttl`: the lease the waiter gets when
  // a fair key is handed to it (the claim lease, as a fair waiter's); `waiterLease`: how long its
  // place lasts unless renewed.
  AwaitResult await(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                    std::uint64_t fencingToken, std::chrono::milliseconds ttl, std::chrono::milliseconds waiterLease) {
    check(key, name, token, "await");
    detail::checkFencingToken(fencingToken, "await");
    detail::checkLeaseTime(ttl, "the lease", "await");
    detail::checkLeaseTime(waiterLease, "the waiter lease", "await");
    return doAwait(key, name, token, lock, fencingToken, ttl, waiterLease);
  }

  // Moves the longest live waiter (signal) or every live waiter in order (signalAll).
  SignalResult signal(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock) {
    check(key, name, token, "signal");
    return doSignal(key, name, token, lock, false);
  }
  SignalResult signalAll(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock) {
    check(key, name, token, "signalAll");
    return doSignal(key, name, token, lock, true);
  }

  // True when `waiter` is still on its condition, whose place now lasts `waiterLease` from now.
  // ConnectionError when the backend could not be reached.
  bool renewAwait(const ConditionWaiter& waiter, std::chrono::milliseconds waiterLease) {
    const ExtendResult renewed = renewAwaitAll({waiter}, waiterLease).front();
    if (renewed.unknown) {
      throw ConnectionError("dlock: renewAwait " + detail::quoteKey(waiter.key) + ": the backend could not be reached");
    }
    return renewed.extended;
  }
  // renewAwait for the watchdog's batch: one entry per waiter, in order, as IOperator::extendAll
  // (`extended` false: no longer waiting; `unknown` when the backend could not be reached).
  std::vector<ExtendResult> renewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                          std::chrono::milliseconds waiterLease) {
    for (const auto& waiter : waiters) {
      check(waiter.key, waiter.name, waiter.token, "renewAwait");
      detail::checkLeaseTime(waiter.ttl, "the lease", "renewAwait");
    }
    detail::checkLeaseTime(waiterLease, "the waiter lease", "renewAwait");
    return doRenewAwaitAll(waiters, waiterLease);
  }

  // Out of the condition (`ttl` as given to await): true when `token` was on it, false when it was
  // not (signalled already: a fair waiter then leaves the key's queue too).
  bool leaveCondition(std::string_view key, std::string_view name, std::string_view token,
                      std::chrono::milliseconds ttl) {
    check(key, name, token, "leaveCondition");
    detail::checkLeaseTime(ttl, "the lease", "leaveCondition");
    return doLeaveCondition(key, name, token, ttl);
  }

  // Signals to `token`'s process on an exclusive key: Granted (fencingToken 0, lease 0: nothing is
  // held) once it was signalled; Recheck when one may have been missed. Taken before the await it
  // follows. A fair key's waiter hears its hand-off on IFairOperator::watchGrants instead.
  std::unique_ptr<IGrantWatch> watchSignals(std::string_view key, std::string_view token) {
    detail::checkKey(key, "watchSignals");
    detail::checkToken(token, "watchSignals");
    return doWatchSignals(key, token);
  }

  // Reads the live waiters of a condition without changing them.
  ConditionInfo inspectCondition(std::string_view key, std::string_view name) {
    detail::checkKey(key, "inspectCondition");
    checkName(name, "inspectCondition");
    return doInspectCondition(key, name);
  }

  // Why this backend's configuration cannot serve a condition; empty when it can.
  [[nodiscard]] virtual std::string conditionUnsupported() const { return {}; }

 private:
  virtual AwaitResult doAwait(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                              std::uint64_t fencingToken, std::chrono::milliseconds ttl,
                              std::chrono::milliseconds waiterLease) = 0;
  virtual SignalResult doSignal(std::string_view key, std::string_view name, std::string_view token,
                                ConditionLock lock, bool all) = 0;
  virtual std::vector<ExtendResult> doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                                    std::chrono::milliseconds waiterLease) = 0;
  virtual bool doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                                std::chrono::milliseconds ttl) = 0;
  virtual std::unique_ptr<IGrantWatch> doWatchSignals(std::string_view key, std::string_view token) = 0;
  virtual ConditionInfo doInspectCondition(std::string_view key, std::string_view name) = 0;

  static void checkName(std::string_view name, const char* operation) {
    if (name.empty() || name.size() > kMaxConditionNameBytes) {
      throw InvalidArgumentError(std::string("dlock: ") + operation + ": the condition name " +
                                 detail::quoteText(name, 40) + " has " + std::to_string(name.size()) +
                                 " bytes, not 1 to " + std::to_string(kMaxConditionNameBytes));
    }
  }
  static void check(std::string_view key, std::string_view name, std::string_view token, const char* operation) {
    detail::checkKey(key, operation);
    checkName(name, operation);
    detail::checkToken(token, operation);
  }
};

}  // namespace dlock
