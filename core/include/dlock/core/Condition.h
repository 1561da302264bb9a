// SPDX-License-Identifier: Apache-2.0
// Condition.h — a condition of one key of an ILock (java.util.concurrent.locks.Condition), made by
// ILock::newCondition(key, name). Any process whose lock uses the same backend, key and name shares
// it; the waiters wait in the backend (IConditionOperator.h), longest first.
//
//   call              needs the key held   while waiting                       returns
//   await(...)        by this thread       the key is free (every reentrant    holding the key again with
//                                          count given up in one step)          the same count
//   awaitFor/Until    by this thread       as await                            true: signalled; false: the
//                                                                              time ran out (key held too)
//   signal()          by this thread       —                                   moves the longest live waiter
//   signalAll()       by this thread       —                                   moves every live waiter
//
// Not held by this thread: NotOwnerError, nothing sent. Held but its lease lost (the backend says
// the key is not this token's): LockLostError, nothing joined (the hold stays, lost, so unlock
// reports it too). A signal with nobody waiting is not remembered; a signal skips waiters whose
// waiter lease ended (their process died).
//
// Spurious returns: await may return without a signal (as the JDK allows), e.g. when the waiter's
// place ended while the backend could not be reached; test the predicate in a loop.
// Re-acquiring: after the wait ends (a signal, the time out, a cancel) the key is taken again
// through the lock's wait, with no deadline: awaitFor may return later than its budget, as the
// JDK's awaitNanos does. On the fair lock a signalled waiter is handed the key in its queue order.
// Cancel (its CancelToken): InterruptedError after leaving the condition and re-acquiring the key,
// so the caller's guard still releases it (the JDK re-acquires before throwing too); a token
// cancelled before the call throws at once, sending nothing, still holding the key. A waiter
// signalled before its cancel took effect returns normally instead (the JDK's await does the same
// when interrupted after its signal): the signal is never lost to the other waiters, and the
// still-cancelled token ends the caller's next wait.
// close() of the lock during a wait: InterruptedError without re-acquiring (the JDK has no closed
// lock; its analogue, a lock nobody may take any more, would block for ever): the key is not held,
// and the caller's unlock reports LockLostError, as for every hold released at close.
// Errors while waiting: ConnectionError once the lock's outage tolerance is spent; the key is then
// not held (the hold was given up) unless the give-up itself was never answered (then unlock asks).
//
// A Condition is a small value (the lock's core, the key and the name): copy it freely; copies are
// the same condition. It keeps the lock's core alive, not the lock: after the lock is destroyed
// (closed) every await throws InterruptedError. A forked child's copies act for the child only.
// Owner: a value. Thread safety: thread-safe (each call acts for the calling thread).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/Cancel.h"
#include "dlock/ILock.h"

namespace dlock {
namespace detail {
class LockCore;
}

class Condition {
 public:
  using Deadline = ILock::Deadline;

  // Made by ILock::newCondition; `core` is the lock's.
  Condition(std::shared_ptr<detail::LockCore> core, std::string key, std::string name);

  // Waits until signalled (or a spurious return); holds the key with the same count on return.
  void await() { (void)wait(Deadline::max(), kNeverCancelled); }
  // As await(), ended by `cancel` (or the lock's close()) with InterruptedError (see above).
  void await(const CancelToken& cancel) { (void)wait(Deadline::max(), cancel); }

  // Waits at most `timeout`: false when it ran out before a signal. Holds the key either way. A
  // timeout <= 0 only checks the hold (NotOwnerError, LockLostError) and returns false.
  [[nodiscard]] bool awaitFor(std::chrono::milliseconds timeout) { return awaitFor(timeout, kNeverCancelled); }
  [[nodiscard]] bool awaitFor(std::chrono::milliseconds timeout, const CancelToken& cancel);

  // awaitFor(until - now), on `until`'s own clock.
  template <class Clock, class Duration>
  [[nodiscard]] bool awaitUntil(const std::chrono::time_point<Clock, Duration>& until,
                                const CancelToken& cancel = kNeverCancelled) {
    return awaitFor(std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()), cancel);
  }

  // Moves the longest live waiter (signal) or every live waiter (signalAll) to the key's wait; the
  // key's release lets it in. NotOwnerError when this thread does not hold the key (or its lease
  // was lost: the backend is the judge).
  void signal() { signal(false); }
  void signalAll() { signal(true); }

  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  static inline const CancelToken kNeverCancelled{};

  // False when `deadline` came before a signal.
  bool wait(Deadline deadline, const CancelToken& cancel);
  void signal(bool all);

  std::shared_ptr<detail::LockCore> core_;
  std::string key_;
  std::string name_;
};

// ILock::newCondition, here because it needs the complete Condition.
inline Condition ILock::newCondition(std::string_view key, std::string_view name) {
  detail::checkKey(key, "newCondition");
  return doNewCondition(key, name);
}

}  // namespace dlock
