// SPDX-License-Identifier: Apache-2.0
// Condition.h — a condition of one key of an ILock (java.util.concurrent.locks.Condition), made by
// ILock::newCondition(key, name) and shared by every process using the same backend, key and name.
//
//   call                 needs          while waiting                  returns
//   await([cancel])      the key held   the key free: every reentrant  holding the key, same count
//                        by this thread count given up in one step
//   awaitFor/Until       as await       as await                       true: signalled; false: timed
//                                                                      out (the key held either way)
//   signal/signalAll     as await       —                              moves the longest / every live
//                                                                      waiter (none: not remembered)
//
// Not held by this thread: NotOwnerError, nothing sent; held but the backend says its lease ended:
// LockLostError (await joins nothing; unlock reports the loss too), NotOwnerError (signal). The key
// is re-taken through the lock's own wait with no deadline, so awaitFor may return after its budget
// (as the JDK's awaitNanos); on the fair lock a signalled waiter is handed the key in queue order.
// Spurious returns happen (e.g. a waiter's place that ended unrenewed): test the predicate in a loop.
// Cancel: InterruptedError after leaving the condition and re-taking the key (as the JDK); a token
// cancelled before the call throws at once, still holding; a waiter signalled before its cancel
// returns normally (as the JDK), so no signal is lost. close() during a wait, or during the re-take
// after a cancel: InterruptedError without the key (the JDK has no closed lock); the thread held
// nothing since the await gave the key up, so its unlock (a guard's) ends the hold silently. After
// the outage tolerance: ConnectionError, the key given up. An await whose answer never came may still
// run on the server and free the key for another: the hold is lost at once (isHeld false, unlock
// LockLostError, onLockLost told) and its key freed in the background if it still is ours.
// A small value: copies are the same condition; it keeps the lock's core (not the lock) alive, and
// once the lock is closed every await throws InterruptedError. A forked child's copies act for it.
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
