// SPDX-License-Identifier: Apache-2.0
// ILock.h — ILock: a JDK-Lock-like lock on named keys, shared by every process on the same backend.
//
//                        lock(k)          tryLock(k[, t])         unlock(k)
//   free                 held, count 1    true                    NotOwnerError
//   held by this thread  count + 1        true, count + 1         count - 1; released at 0
//   held by another      waits            false (after t)         NotOwnerError
//   our lease lost       LockLostError    LockLostError           LockLostError (hold forgotten)
//
// "Lost" is what isHeld(k) sees: the watchdog found the lease gone, or its local deadline passed.
// A timeout t <= 0 tries once (java.util.concurrent.locks.Lock, try_lock_for); a lease time must
// be positive and at most kMaxLeaseTime, else InvalidArgumentError before anything is sent.
//
// Holds belong to the calling thread: the token of each held key lives in thread-local storage
// (RequestIdHolder), so unlock(k) takes no token and one thread may hold many keys. For work
// that moves between threads, acquire() returns a Lease object instead.
//
// Timing out is a `false` return; a backend failure is an exception (ConnectionError,
// BackendError). If lock/tryLock/acquire throws, the caller holds nothing new.
//
// Cancellation and shutdown: a wait given a CancelToken (Cancel.h) throws InterruptedError soon
// after the token is cancelled (at once, sending nothing, when it is cancelled already), leaving
// no queue place and no key behind. close() — and destroying the lock — wakes every wait of this
// lock with InterruptedError, refuses new ones (InterruptedError, nothing sent), and releases
// every key a thread of this process still holds through it (each logged "released at close");
// such a thread's unlock then reports LockLostError. Leases (acquire()) stay their holders' and
// are released by them. A forked child's close() releases nothing of its parent's.
// Services take a std::shared_ptr<ILock> by injection; dlock::LockBuilder makes one over any
// IOperator, the in-memory one in tests.
// Owner: shared (std::shared_ptr). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Cancel.h"
#include "dlock/Lease.h"
#include "dlock/LockError.h"
#include "dlock/LockOptions.h"
#include "dlock/LockStats.h"
#include "dlock/MutexHandle.h"
#include "dlock/Validation.h"

namespace dlock {

class Condition;  // dlock/core/Condition.h
namespace detail {
class AsyncAcquisition;  // dlock/async.h
}
// How an asynchronous acquire completes (dlock/async.h): a Lease (empty on timeout), or an error.
using AsyncCallback = std::function<void(Lease lease, std::exception_ptr error)>;

class ILock {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  // Called when the watchdog finds a held lease lost; runs on the watchdog's thread.
  using LostHandler = std::function<void(std::string_view key, std::uint64_t fencingToken)>;

  ILock(const ILock&) = delete;
  ILock& operator=(const ILock&) = delete;
  virtual ~ILock() = default;

  // Blocks until the key is held by this thread.
  void lock() { lock(defaultKey()); }
  void lock(std::string_view key) {
    detail::checkKey(key, "lock");
    (void)doAcquire(key, kNoDeadline, std::nullopt, kNeverCancelled);
  }
  // As lock(key), ended by `cancel` (or close()) with InterruptedError; the JDK's
  // lockInterruptibly is the same call.
  void lock(std::string_view key, const CancelToken& cancel) {
    detail::checkKey(key, "lock");
    (void)doAcquire(key, kNoDeadline, std::nullopt, cancel);
  }
  void lockInterruptibly(std::string_view key, const CancelToken& cancel) { lock(key, cancel); }

  // Tries once.
  [[nodiscard]] bool tryLock() { return tryLock(defaultKey()); }
  [[nodiscard]] bool tryLock(std::string_view key) {
    detail::checkKey(key, "tryLock");
    return doAcquire(key, kTryOnce, std::nullopt, kNeverCancelled);
  }

  // Waits at most `timeout` (steady clock) with the lock's IWait strategy; false on timeout.
  // `timeout <= 0` tries once, as tryLock(key) does, so a budget computed as `deadline - now`
  // may run out without an exception.
  [[nodiscard]] bool tryLock(std::chrono::milliseconds timeout) { return tryLock(defaultKey(), timeout); }
  [[nodiscard]] bool tryLock(std::string_view key, std::chrono::milliseconds timeout) {
    detail::checkKey(key, "tryLock");
    return doAcquire(key, deadlineAfter(timeout), std::nullopt, kNeverCancelled);
  }
  // As above, ended early by `cancel` (or close()) with InterruptedError.
  [[nodiscard]] bool tryLock(std::string_view key, std::chrono::milliseconds timeout, const CancelToken& cancel) {
    detail::checkKey(key, "tryLock");
    return doAcquire(key, deadlineAfter(timeout), std::nullopt, cancel);
  }
  // As above with this acquisition's own lease instead of the lock's (Redisson's
  // tryLock(waitTime, leaseTime)); an explicit lease is not renewed by the watchdog.
  [[nodiscard]] bool tryLock(std::string_view key, std::chrono::milliseconds timeout,
                             std::chrono::milliseconds leaseTime) {
    detail::checkKey(key, "tryLock");
    detail::checkLeaseTime(leaseTime, "the lease time", "tryLock");
    return doAcquire(key, deadlineAfter(timeout), leaseTime, kNeverCancelled);
  }

  // Releases one hold of this thread; the lease is released when the count reaches zero.
  // NotOwnerError when this thread does not hold the key; LockLostError when the lease had ended,
  // at any count (the hold is forgotten: every enclosing section ran unprotected too);
  // ConnectionError keeps the hold so unlock can be retried. A retry that finds the key gone
  // while the lease is still valid took it as released by the try whose reply was lost.
  void unlock() { unlock(defaultKey()); }
  void unlock(std::string_view key) {
    detail::checkKey(key, "unlock");
    doUnlock(key);
  }

  // unlock() for destructors and noexcept paths: logs instead of throwing, and on failure
  // forgets the hold so the lease ends at its TTL. False when nothing was released cleanly.
  bool unlockQuietly(std::string_view key) noexcept { return doUnlockQuietly(key); }

  // True when this thread holds the key and, as far as this client knows, the lease has neither
  // ended nor been found lost. Local: no round trip.
  [[nodiscard]] bool isHeld() const { return isHeld(defaultKey()); }
  [[nodiscard]] bool isHeld(std::string_view key) const { return doIsHeld(key); }

  // How many times this thread holds the key (0 when it does not).
  [[nodiscard]] unsigned holdCount(std::string_view key) const { return doHoldCount(key); }

  // Moves the end of this thread's fixed-lease hold of the key (a lease time given to tryLock or
  // the lock's LockOptions::leaseTime) to `ttl` from now: one round trip. NotOwnerError when not
  // held; InvalidArgumentError for a bad ttl or a lease the watchdog renews (nothing sent);
  // LockLostError when the lease had ended; ConnectionError leaves it as it was.
  void extend(std::string_view key, std::chrono::milliseconds ttl) {
    detail::checkKey(key, "extend");
    detail::checkLeaseTime(ttl, "the lease time", "extend");
    doExtend(key, ttl);
  }

  // How long this thread's hold of the key lasts, as far as this client knows (its local
  // deadline minus now); zero when not held or ended. Local: no round trip.
  [[nodiscard]] std::chrono::milliseconds remainingLease(std::string_view key) const { return doRemainingLease(key); }

  // Ends every wait of this lock (InterruptedError), refuses new ones, and releases what this
  // process's threads still hold through it, each bounded by the backend's command timeout (see
  // the top of this file). Idempotent. The destructor does the same.
  void close() noexcept { doClose(); }

  // The fencing token of this thread's hold of the key; NotOwnerError when not held.
  [[nodiscard]] std::uint64_t fencingToken() const { return fencingToken(defaultKey()); }
  [[nodiscard]] std::uint64_t fencingToken(std::string_view key) const { return doFencingToken(key); }

  // The key as a standard Lockable/TimedLockable (see MutexHandle.h).
  [[nodiscard]] MutexHandle mutex() { return MutexHandle(*this, defaultKey()); }
  [[nodiscard]] MutexHandle mutex(std::string_view key) {
    detail::checkKey(key, "mutex");
    return MutexHandle(*this, key);
  }

  // An acquisition as a movable object with its own token, not tied to this thread. Waits as
  // options.waitTime says (unset: as long as it takes; <= 0: tries once); an empty Lease when
  // that timed out.
  [[nodiscard]] Lease acquire(std::string_view key, const AcquireOptions& options = {}) {
    detail::checkKey(key, "acquire");
    if (options.leaseTime) detail::checkLeaseTime(*options.leaseTime, "the lease time", "acquire");
    return doAcquireLease(key, options.waitTime ? deadlineAfter(*options.waitTime) : kNoDeadline, options.leaseTime,
                          options.cancel);
  }

  // acquire() without blocking a thread, completing on the lock's completion thread (see
  // dlock/async.h, which defines these calls).
  [[nodiscard]] inline std::future<Lease> acquireAsync(std::string_view key, const AcquireOptions& options = {});
  inline void acquireAsync(std::string_view key, const AcquireOptions& options, AsyncCallback callback);

  // A condition of `key` named `name` (see dlock/core/Condition.h, which defines this call):
  // await releases the key and waits for a signal. ConfigError when the backend keeps no
  // conditions (Redlock) or the lock is a read-write lock's side; InvalidArgumentError for an
  // empty or oversized name. Sends nothing.
  [[nodiscard]] inline Condition newCondition(std::string_view key, std::string_view name);

  // Registers a handler for leases the watchdog finds lost (replaces the previous one).
  void onLockLost(LostHandler handler) { doOnLockLost(std::move(handler)); }

  [[nodiscard]] LockStats stats() const { return doStats(); }
  [[nodiscard]] const std::string& defaultKey() const noexcept { return doDefaultKey(); }

 protected:
  ILock() = default;

  static constexpr Deadline kTryOnce = Deadline::min();
  static constexpr Deadline kNoDeadline = Deadline::max();
  static inline const CancelToken kNeverCancelled{};

  // kTryOnce for a timeout <= 0; kNoDeadline when now + timeout would not fit.
  static Deadline deadlineAfter(std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) return kTryOnce;
    const auto now = std::chrono::steady_clock::now();
    if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now)) return kNoDeadline;
    return now + timeout;
  }

 private:
  friend class MutexHandle;

  // The hooks. Arguments are validated. `deadline` is kTryOnce, kNoDeadline or a point in time;
  // `leaseTime` unset means the lock's own; `cancel` ends the wait (InterruptedError).
  virtual bool doAcquire(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                         const CancelToken& cancel) = 0;
  virtual void doUnlock(std::string_view key) = 0;
  virtual bool doUnlockQuietly(std::string_view key) noexcept = 0;
  [[nodiscard]] virtual bool doIsHeld(std::string_view key) const = 0;
  [[nodiscard]] virtual unsigned doHoldCount(std::string_view key) const = 0;
  [[nodiscard]] virtual std::uint64_t doFencingToken(std::string_view key) const = 0;
  virtual Lease doAcquireLease(std::string_view key, Deadline deadline,
                               std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel) = 0;
  virtual void doExtend(std::string_view key, std::chrono::milliseconds ttl) = 0;
  [[nodiscard]] virtual std::chrono::milliseconds doRemainingLease(std::string_view key) const = 0;
  virtual void doClose() noexcept = 0;
  virtual void doOnLockLost(LostHandler handler) = 0;
  [[nodiscard]] virtual Condition doNewCondition(std::string_view key, std::string_view name) = 0;
  [[nodiscard]] virtual LockStats doStats() const = 0;
  [[nodiscard]] virtual const std::string& doDefaultKey() const noexcept = 0;
  // The lock's asynchronous acquisitions; ConfigError for a lock that has none.
  virtual detail::AsyncAcquisition& doAsyncAcquisition() {
    throw ConfigError("dlock: this lock has no asynchronous acquisition");
  }
};

// MutexHandle members, here because they need the complete ILock.
inline void MutexHandle::lock() { lock_->lock(key_); }

inline bool MutexHandle::try_lock() { return lock_->tryLock(key_); }

inline bool MutexHandle::tryLockFor(std::chrono::milliseconds wait) { return lock_->tryLock(key_, wait); }

template <class Rep, class Period>
bool MutexHandle::try_lock_for(const std::chrono::duration<Rep, Period>& wait) {
  // Round up, so a sub-millisecond wait still waits rather than trying once.
  return tryLockFor(std::chrono::ceil<std::chrono::milliseconds>(wait));
}

template <class Clock, class Duration>
bool MutexHandle::try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
  return try_lock_for(until - Clock::now());
}

inline void MutexHandle::unlock() noexcept { (void)lock_->unlockQuietly(key_); }

inline void MutexHandle::unlockOrThrow() { lock_->unlock(key_); }

}  // namespace dlock
