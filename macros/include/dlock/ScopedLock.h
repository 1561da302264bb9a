// SPDX-License-Identifier: Apache-2.0
// ScopedLock.h — ScopedLock: holds one key of an ILock for a scope, like std::lock_guard.
//
// The blocking constructor waits until the key is held; the timed one waits at most `timeout`
// (<= 0: tries once) and owns() says whether it got the key. The destructor releases and never
// throws: a failed release is logged on the `dlock` logger and the lease ends at its TTL.
// unlock() releases early and reports, as Abseil's ReleasableMutexLock::Release() does, so a
// section learns whether it was protected to its end (LockLostError); the destructor then does
// nothing. The DISTRIBUTED_LOCK macros are built on it.
// Owner: the scope. Thread safety: not thread-safe; lives and dies on one thread (the hold is
// the thread's). Neither copyable nor movable, like std::lock_guard.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/ILock.h"

namespace dlock {

class ScopedLock {
 public:
  ScopedLock(std::shared_ptr<ILock> lock, std::string_view key) : lock_(std::move(lock)), key_(key) {
    lock_->lock(key_);
    owns_ = true;
  }
  ScopedLock(ILock& lock, std::string_view key) : ScopedLock(borrow(lock), key) {}

  ScopedLock(std::shared_ptr<ILock> lock, std::string_view key, std::chrono::milliseconds timeout)
      : lock_(std::move(lock)), key_(key) {
    owns_ = lock_->tryLock(key_, timeout);
  }
  ScopedLock(ILock& lock, std::string_view key, std::chrono::milliseconds timeout)
      : ScopedLock(borrow(lock), key, timeout) {}

  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;
  ScopedLock(ScopedLock&&) = delete;
  ScopedLock& operator=(ScopedLock&&) = delete;

  ~ScopedLock() {
    if (owns_) (void)lock_->unlockQuietly(key_);
  }

  // Releases the key now. LockLostError when the lease had ended before (the section was not
  // protected to its end), NotOwnerError when this guard does not hold the key; after either,
  // or after success, the destructor does nothing. ConnectionError and BackendError keep the
  // hold: call unlock() again, or let the destructor try once more (quietly).
  void unlock() {
    if (!owns_) throw NotOwnerError("dlock: unlock " + detail::quoteKey(key_) + ": this guard does not hold the key");
    try {
      lock_->unlock(key_);
    } catch (const ConnectionError&) {
      throw;
    } catch (const BackendError&) {
      throw;
    } catch (...) {
      owns_ = false;  // released, lost or not held: nothing left for the destructor
      throw;
    }
    owns_ = false;
  }

  [[nodiscard]] bool owns() const noexcept { return owns_; }
  explicit operator bool() const noexcept { return owns_; }
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  // The fencing token of this hold (NotOwnerError when not owned).
  [[nodiscard]] std::uint64_t fencingToken() const { return lock_->fencingToken(key_); }

 private:
  // A non-owning shared_ptr for locks passed by reference; the caller keeps them alive.
  static std::shared_ptr<ILock> borrow(ILock& lock) { return std::shared_ptr<ILock>(std::shared_ptr<ILock>(), &lock); }

  std::shared_ptr<ILock> lock_;
  std::string key_;
  bool owns_ = false;
};

}  // namespace dlock
