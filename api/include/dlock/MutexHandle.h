// SPDX-License-Identifier: Apache-2.0
// MutexHandle.h — MutexHandle: one key of an ILock as a standard mutex.
//
// ILock::mutex(key) returns a MutexHandle that meets Cpp17Lockable and Cpp17TimedLockable, so
// std::lock_guard, std::unique_lock (try_to_lock, try_lock_for, try_lock_until) and
// std::scoped_lock over several keys work:
//
//   auto a = lock->mutex("a"), b = lock->mutex("b");
//   std::scoped_lock both(a, b);              // deadlock-free, as std::lock is
//   std::unique_lock guard(a, 2s);            // try_lock_for
//   if (!guard) return;
//
// Locking goes through the ILock, so holds are per thread and reentrant. As the standard
// requires, unlock() throws nothing: a failed release is logged and the lease ends at its TTL.
// unlockOrThrow() is the reporting form, for code that must learn that its lease was lost:
//
//   std::unique_lock<dlock::MutexHandle> guard(m);
//   ...                                       // the critical section
//   guard.release()->unlockOrThrow();         // LockLostError if the lease ended meanwhile
//
// try_lock_for/until with a non-positive wait try once, as the standard's do.
// Owner: the caller; the ILock must outlive the handle. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace dlock {

class ILock;

class MutexHandle {
 public:
  MutexHandle(ILock& lock, std::string_view key) : lock_(&lock), key_(key) {}

  void lock();
  [[nodiscard]] bool try_lock();
  template <class Rep, class Period>
  [[nodiscard]] bool try_lock_for(const std::chrono::duration<Rep, Period>& wait);
  template <class Clock, class Duration>
  [[nodiscard]] bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until);
  void unlock() noexcept;
  // unlock() that reports, as ILock::unlock does: LockLostError when the lease had ended before
  // (the hold is forgotten), NotOwnerError when not held, ConnectionError keeping the hold.
  void unlockOrThrow();

  [[nodiscard]] const std::string& key() const noexcept { return key_; }

 private:
  [[nodiscard]] bool tryLockFor(std::chrono::milliseconds wait);

  ILock* lock_;
  std::string key_;
};

}  // namespace dlock

#include "dlock/ILock.h"  // the member definitions need the complete ILock
