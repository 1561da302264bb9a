// SPDX-License-Identifier: Apache-2.0
// ConditionHold.h — an exclusive hold of a key with conditions beside it, as the fault tests'
// bounded-buffer workload uses it (ICondHold, ICondHolder, makeConditionHolder): acquire, look
// whether it still holds, await a condition, signal one, release. The workload (Client.cpp) sees
// only this interface, so the holder over the backend's operators here can later be swapped for
// the core's Condition class.
//
// The holder over the operators (IOperator, IConditionOperator with ConditionLock::Exclusive):
//   acquire   attempt (IOperator::lock), wait for the key's release message or its holder's
//             lease end, attempt again, until the timeout
//   renewal   every third of the lease (extendAll), as the watchdog does; "not ours" or the local
//             deadline (the last confirmed send + its validity) passing ends the hold for good
//   await     watchSignals, then one await (joins the condition and releases the key in one
//             script); the renewer stops and the hold is not held from that call on. The waiter
//             renews its place (renewAwaitAll) every third of the waiter lease: false (signalled,
//             or dropped once its lease ended) or a signal message ends the wait; so does the
//             timeout (leaveCondition), or its place's local deadline passing unrenewed. Then it
//             re-acquires the key as acquire does (same owner token, a new fencing token), and
//             only a confirmed acquisition makes it a holder again.
//   signal    signalAll on the condition: NotOwnerError when the server says not the owner
//
// It records, with the sink (History.h ops, message = the owner token):
//   lease    time = the send of an acquisition or renewal the backend confirmed, value = its
//            validity in ms (as LeaseRecorder.h)
//   taken    time = the send of an acquisition the backend confirmed (acquire's or await's),
//            value = when its reply came (ns)
//   joined   the await's script answered: on the condition (value = the condition's name)
//   woken    the wait ended: value "<name> signalled|timeout|lapsed" (before a timed-out waiter
//            leaves its place)
//   lost     a renewal found the hold gone (token = the fencing token)
// Owner: one client process. Thread safety: a holder is thread-safe; a hold is used by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <dlock/IConditionOperator.h>
#include <dlock/IOperator.h>

#include "History.h"

namespace dlock::nemesis {

class ICondHold {
 public:
  ICondHold() = default;
  ICondHold(const ICondHold&) = delete;
  ICondHold& operator=(const ICondHold&) = delete;
  virtual ~ICondHold() = default;

  // The fencing token of the current acquisition (a new one after each await).
  [[nodiscard]] virtual std::uint64_t fencingToken() const = 0;
  [[nodiscard]] virtual const std::string& ownerToken() const = 0;
  // False once a renewal found it gone, its local deadline passed, or inside an await.
  [[nodiscard]] virtual bool isHeld() const = 0;
  // Gives up the key and waits on `name` until signalled or `timeout`, then re-acquires: true
  // once held again (a spurious return is allowed). LockLostError when the key was not held at
  // the await (nothing joined); ConnectionError and the like when it could not re-acquire within
  // `reacquire`: the hold is then not held.
  virtual bool await(const std::string& name, std::chrono::milliseconds timeout, std::chrono::milliseconds reacquire) = 0;
  // Signals every waiter of `name`; the waiters moved. NotOwnerError when not the owner.
  virtual std::uint32_t signalAll(const std::string& name) = 0;
  // Releases it; LockLostError when it had been lost (the backend said not ours).
  virtual void release() = 0;
};

class ICondHolder {
 public:
  ICondHolder() = default;
  ICondHolder(const ICondHolder&) = delete;
  ICondHolder& operator=(const ICondHolder&) = delete;
  virtual ~ICondHolder() = default;

  // Waits up to `timeout`; null on timeout. `fixedLease` 0: the holder's lease, renewed; else that
  // lease, never renewed (a hold that outlives it is lost).
  [[nodiscard]] virtual std::unique_ptr<ICondHold> acquire(const std::string& key, std::chrono::milliseconds timeout,
                                                           std::chrono::milliseconds fixedLease) = 0;
};

// A holder over `lock` and `conditions` (the same backend, or a double over it: BrokenCondition.h),
// with the hold's `lease` and the waiters' `waiterLease`.
[[nodiscard]] std::shared_ptr<ICondHolder> makeConditionHolder(std::shared_ptr<IOperator> lock,
                                                               std::shared_ptr<IConditionOperator> conditions,
                                                               std::function<void(Op)> sink,
                                                               std::chrono::milliseconds lease,
                                                               std::chrono::milliseconds waiterLease);

}  // namespace dlock::nemesis
