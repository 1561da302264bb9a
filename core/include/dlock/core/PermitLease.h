// SPDX-License-Identifier: Apache-2.0
// PermitLease.h — PermitLease: permits of a semaphore (Semaphore.h) held as an object.
//
// Semaphore::acquire() returns one: move-only, not tied to a thread, released when destroyed (a
// Lease underneath, so the same rules: destruction never throws; a failed release is logged and
// the permits come back at their lease's end, by the backend's clock). Empty when the acquire
// timed out, after release(), and once moved from.
//
//                  release()                     isHeld()   fencingToken(), permits()   extend(ttl)
//   empty          NotOwnerError                 false      NotOwnerError               NotOwnerError
//   held           released; empty               true       the grant's                 moved (fixed lease)
//   lease ended    LockLostError; empty          false      the grant's                 LockLostError
//
// Owner: whoever holds the object. Thread safety: not thread-safe (one thread at a time, like
// std::unique_ptr); moving it between threads is fine.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "dlock/Lease.h"
#include "dlock/LockError.h"

namespace dlock {

class PermitLease {
 public:
  PermitLease() noexcept = default;
  // `permits` held under `lease`.
  PermitLease(Lease lease, std::uint32_t permits) noexcept : lease_(std::move(lease)), permits_(permits) {}
  PermitLease(const PermitLease&) = delete;
  PermitLease& operator=(const PermitLease&) = delete;
  PermitLease(PermitLease&& other) noexcept = default;
  PermitLease& operator=(PermitLease&& other) noexcept = default;
  ~PermitLease() = default;  // the Lease releases quietly

  // True while this object owns permits (their lease may still have ended: see isHeld()).
  explicit operator bool() const noexcept { return static_cast<bool>(lease_); }

  // Gives the permits back now (the backend admits the waiters that fit in the same step).
  // NotOwnerError when empty (a second release); LockLostError when their lease had ended first;
  // ConnectionError or BackendError keeps them, so the release can be retried.
  void release() {
    if (!lease_) throw NotOwnerError("dlock: release of an empty PermitLease (released already, moved from, or timed out)");
    lease_.release();
  }

  // True while held and, as far as this client knows, the lease has neither ended nor been lost.
  [[nodiscard]] bool isHeld() const { return lease_.isHeld(); }
  // The semaphore's name, this grant's token and fencing token; NotOwnerError when empty.
  [[nodiscard]] const std::string& name() const { return lease_.key(); }
  [[nodiscard]] const std::string& token() const { return lease_.token(); }
  [[nodiscard]] std::uint64_t fencingToken() const { return lease_.fencingToken(); }
  // How many permits; NotOwnerError when empty.
  [[nodiscard]] std::uint32_t permits() const {
    (void)lease_.key();  // throws when empty
    return permits_;
  }
  // Until when the permits hold as far as this client knows (see Lease::validUntil).
  [[nodiscard]] std::chrono::steady_clock::time_point validUntil() const { return lease_.validUntil(); }
  // What is left of that, on the semaphore's clock; zero when not held or ended. Local.
  [[nodiscard]] std::chrono::milliseconds remainingLease() const { return lease_.remainingLease(); }
  [[nodiscard]] std::chrono::milliseconds remaining() const { return remainingLease(); }
  // Moves the end of permits held for a fixed lease time (AcquireOptions::leaseTime) to `ttl`
  // from now, one round trip, as Lease::extend: NotOwnerError when empty; InvalidArgumentError
  // for a bad ttl or permits the watchdog renews (nothing sent); LockLostError when their lease
  // had ended; ConnectionError leaves it as it was.
  void extend(std::chrono::milliseconds ttl) {
    if (!lease_) throw NotOwnerError("dlock: extend of an empty PermitLease (released already, moved from, or timed out)");
    lease_.extend(ttl);
  }

 private:
  Lease lease_;
  std::uint32_t permits_ = 0;
};

}  // namespace dlock
