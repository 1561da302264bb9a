// SPDX-License-Identifier: Apache-2.0
// Lease.h — Lease: one acquisition held as an object rather than by the calling thread.
//
// ILock::acquire() returns a Lease that carries its own token and fencing token. It is
// move-only, not tied to the thread-local holder, may be moved to and released from another
// thread, and releases the key when destroyed. Destruction never throws: a failed release is
// logged on the `dlock` logger and the lease then ends on its own at its TTL.
// Owner: whoever holds the object. Thread safety: not thread-safe (one thread at a time, like
// std::unique_ptr); moving it between threads is fine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "dlock/LockError.h"

namespace dlock {
namespace detail {

// The lock's side of a Lease; implemented in core/ (the dlock_core layer).
class LeaseControl {
 public:
  LeaseControl() = default;
  LeaseControl(const LeaseControl&) = delete;
  LeaseControl& operator=(const LeaseControl&) = delete;
  virtual ~LeaseControl() = default;

  // Releases the key: LockLostError if the lease had ended; ConnectionError or BackendError
  // leaves it held.
  virtual void release() = 0;
  // Releases the key, logging instead of throwing; false when the release failed.
  virtual bool releaseQuietly() noexcept = 0;
  [[nodiscard]] virtual bool isHeld() const = 0;
  [[nodiscard]] virtual const std::string& key() const noexcept = 0;
  [[nodiscard]] virtual const std::string& token() const noexcept = 0;
  [[nodiscard]] virtual std::uint64_t fencingToken() const noexcept = 0;
  [[nodiscard]] virtual std::chrono::steady_clock::time_point validUntil() const = 0;
  // Lease::extend and Lease::remainingLease; by default a lease that cannot be extended.
  virtual void extend(std::chrono::milliseconds /*ttl*/) {
    throw InvalidArgumentError("dlock: extend of '" + key() + "': this kind of lease cannot be extended");
  }
  [[nodiscard]] virtual std::chrono::milliseconds remainingLease() const { return std::chrono::milliseconds(0); }
};

}  // namespace detail

class Lease {
 public:
  // An empty lease: what a timed-out acquire returns, and what a moved-from lease becomes.
  Lease() noexcept = default;
  explicit Lease(std::unique_ptr<detail::LeaseControl> control) noexcept : control_(std::move(control)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Lease(Lease&& other) noexcept = default;
  Lease& operator=(Lease&& other) noexcept {
    if (this != &other) {
      reset();
      control_ = std::move(other.control_);
    }
    return *this;
  }
  ~Lease() { reset(); }

  // True while this object owns an acquisition (it may still have been lost: see isHeld()).
  explicit operator bool() const noexcept { return control_ != nullptr; }

  // Releases the key now, reporting what the destructor only logs. NotOwnerError on an empty
  // lease; LockLostError when the lease had ended before the release (the lease is empty
  // afterwards either way); ConnectionError or BackendError keeps the lease, so the release can
  // be retried (or is tried once more by the destructor).
  void release() {
    if (!control_) throw NotOwnerError("dlock: release of an empty lease");
    try {
      control_->release();
    } catch (const LockLostError&) {
      control_.reset();
      throw;
    }
    control_.reset();
  }

  // True while the lease is owned and, as far as this client knows, has not ended or been lost.
  [[nodiscard]] bool isHeld() const { return control_ && control_->isHeld(); }

  // The key, the owner token and the fencing token of this acquisition; NotOwnerError when empty.
  [[nodiscard]] const std::string& key() const { return control().key(); }
  [[nodiscard]] const std::string& token() const { return control().token(); }
  [[nodiscard]] std::uint64_t fencingToken() const { return control().fencingToken(); }
  // Until when, as far as this client knows, the lease holds: when its acquisition or last
  // renewal was sent plus the validity the backend granted (steady clock, or the lock's injected
  // clock). Moves forward with each renewal; past it the lease is not held. NotOwnerError when
  // empty.
  [[nodiscard]] std::chrono::steady_clock::time_point validUntil() const { return control().validUntil(); }

  // Moves the end of a fixed lease (AcquireOptions::leaseTime, or the lock's leaseTime) to `ttl`
  // from now, as ILock::extend does: InvalidArgumentError for a bad ttl or a lease the watchdog
  // renews; LockLostError when it had ended; ConnectionError leaves it as it was. NotOwnerError
  // when empty.
  void extend(std::chrono::milliseconds ttl) {
    if (!control_) throw NotOwnerError("dlock: extend of an empty lease");
    control_->extend(ttl);
  }
  // validUntil() minus now, as far as this client knows; zero when empty or ended. Local.
  [[nodiscard]] std::chrono::milliseconds remainingLease() const {
    return control_ ? control_->remainingLease() : std::chrono::milliseconds(0);
  }

 private:
  const detail::LeaseControl& control() const {
    if (!control_) throw NotOwnerError("dlock: an empty lease has no key or token");
    return *control_;
  }
  void reset() noexcept {
    if (control_) {
      control_->releaseQuietly();
      control_.reset();
    }
  }

  std::unique_ptr<detail::LeaseControl> control_;
};

}  // namespace dlock
