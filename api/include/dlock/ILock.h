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
// Services take a std::shared_ptr<ILock> by injection; dlock::LockBuilder makes one over any
// IOperator, the in-memory one in tests.
// Owner: shared (std::shared_ptr). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Lease.h"
#include "dlock/LockError.h"
#include "dlock/LockOptions.h"
#include "dlock/LockStats.h"
#include "dlock/MutexHandle.h"
#include "dlock/Validation.h"

namespace dlock {

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
    (void)doAcquire(key, kNoDeadline, std::nullopt);
  }

  // Tries once.
  [[nodiscard]] bool tryLock() { return tryLock(defaultKey()); }
  [[nodiscard]] bool tryLock(std::string_view key) {
    detail::checkKey(key, "tryLock");
    return doAcquire(key, kTryOnce, std::nullopt);
  }

  // Waits at most `timeout` (steady clock) with the lock's IWait strategy; false on timeout.
  // `timeout <= 0` tries once, as tryLock(key) does, so a budget computed as `deadline - now`
  // may run out without an exception.
  [[nodiscard]] bool tryLock(std::chrono::milliseconds timeout) { return tryLock(defaultKey(), timeout); }
  [[nodiscard]] bool tryLock(std::string_view key, std::chrono::milliseconds timeout) {
    detail::checkKey(key, "tryLock");
    return doAcquire(key, deadlineAfter(timeout), std::nullopt);
  }
  // As above with this acquisition's own lease instead of the lock's (Redisson's
  // tryLock(waitTime, leaseTime)); an explicit lease is not renewed by the watchdog.
  [[nodiscard]] bool tryLock(std::string_view key, std::chrono::milliseconds timeout,
                             std::chrono::milliseconds leaseTime) {
    detail::checkKey(key, "tryLock");
    detail::checkLeaseTime(leaseTime, "the lease time", "tryLock");
    return doAcquire(key, deadlineAfter(timeout), leaseTime);
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
    return doAcquireLease(key, options.waitTime ? deadlineAfter(*options.waitTime) : kNoDeadline, options.leaseTime);
  }

  // Registers a handler for leases the watchdog finds lost (replaces the previous one).
  void onLockLost(LostHandler handler) { doOnLockLost(std::move(handler)); }

  [[nodiscard]] LockStats stats() const { return doStats(); }
  [[nodiscard]] const std::string& defaultKey() const noexcept { return doDefaultKey(); }

 protected:
  ILock() = default;

  static constexpr Deadline kTryOnce = Deadline::min();
  static constexpr Deadline kNoDeadline = Deadline::max();

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
  // `leaseTime` unset means the lock's own.
  virtual bool doAcquire(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime) = 0;
  virtual void doUnlock(std::string_view key) = 0;
  virtual bool doUnlockQuietly(std::string_view key) noexcept = 0;
  [[nodiscard]] virtual bool doIsHeld(std::string_view key) const = 0;
  [[nodiscard]] virtual unsigned doHoldCount(std::string_view key) const = 0;
  [[nodiscard]] virtual std::uint64_t doFencingToken(std::string_view key) const = 0;
  virtual Lease doAcquireLease(std::string_view key, Deadline deadline,
                               std::optional<std::chrono::milliseconds> leaseTime) = 0;
  virtual void doOnLockLost(LostHandler handler) = 0;
  [[nodiscard]] virtual LockStats doStats() const = 0;
  [[nodiscard]] virtual const std::string& doDefaultKey() const noexcept = 0;
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
