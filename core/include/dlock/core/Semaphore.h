// SPDX-License-Identifier: Apache-2.0
// Semaphore.h — Semaphore: a counting semaphore shared by every process on the same backend, made
// by SemaphoreBuilder (Redisson's RPermitExpirableSemaphore, Redis in Action's chapter 6).
//
//   auto sem = dlock::SemaphoreBuilder().backend(b).name("payments-api").permits(8).build();
//   dlock::PermitLease p = sem->acquire(2, options);   // empty when options.waitTime ran out
//
//                        acquire(n[, options])        tryAcquire(n)
//   n permits free,      held (a new fencing token)   held
//   nobody queued
//   otherwise            queued FIFO; held when a     empty
//                        release admits it, or empty
//                        at options.waitTime
//
// The capacity is stored with the semaphore on the backend: the first user's stands, an acquire
// by one built with another is a ConfigError naming both, and only resize() changes it. Permits
// are leases in the backend's time (renewed by the watchdog unless a lease time is given), so a
// client whose clock runs ahead reclaims nobody's; a holder whose lease ends is told (the lost
// handler, LockLostError from release). A release admits, in the same step, as many head waiters
// as fit, and a small request never passes a large one at the head. Bad input (n = 0, n above
// the capacity, a bad lease) is an InvalidArgumentError with nothing sent. Backends: single,
// Sentinel, Cluster, memory; not Redlock. Every wait is cancellable (AcquireOptions::cancel, close()).
// Owner: shared (std::shared_ptr); PermitLeases keep what they need alive. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Cancel.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/LockOptions.h"
#include "dlock/LockStats.h"
#include "dlock/Validation.h"
#include "dlock/core/PermitLease.h"

namespace dlock {

class Semaphore {
 public:
  using Deadline = std::chrono::steady_clock::time_point;
  // Called when the watchdog finds a PermitLease's lease ended; runs on the watchdog's notifier.
  using LostHandler = std::function<void(std::string_view name, std::uint64_t fencingToken)>;

  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;
  virtual ~Semaphore() = default;

  // `permits` of the semaphore, waiting as options.waitTime says (unset: as long as it takes;
  // <= 0: one try); an empty PermitLease when that ran out. Throws what the backend throws
  // (ConnectionError once the outage budget is spent), or InterruptedError when options.cancel
  // is cancelled or the semaphore closed (before anything is sent, or during the wait, leaving
  // no queue place); then nothing is held.
  [[nodiscard]] PermitLease acquire(std::uint32_t permits, const AcquireOptions& options = {}) {
    check(permits, "acquire");
    if (options.leaseTime) detail::checkLeaseTime(*options.leaseTime, "the lease time", "acquire");
    return doAcquire(permits, options.waitTime ? deadlineAfter(*options.waitTime) : kNoDeadline, options.leaseTime,
                     options.cancel);
  }
  // One try, never queued.
  [[nodiscard]] PermitLease tryAcquire(std::uint32_t permits = 1) {
    check(permits, "tryAcquire");
    return doAcquire(permits, kTryOnce, std::nullopt, kNeverCancelled);
  }
  // Waits at most `timeout` (<= 0: one try); `cancel` ends the wait as in acquire().
  [[nodiscard]] PermitLease tryAcquire(std::uint32_t permits, std::chrono::milliseconds timeout,
                                       const CancelToken& cancel = kNeverCancelled) {
    check(permits, "tryAcquire");
    return doAcquire(permits, deadlineAfter(timeout), std::nullopt, cancel);
  }

  // Ends every wait for permits (InterruptedError) and refuses new ones. PermitLeases handed out
  // stay their holders' (released when they are destroyed). Idempotent; the destructor does the same.
  void close() noexcept { doClose(); }

  // Stores `capacity` for every user of the semaphore (from 1 to kMaxSemaphorePermits, else
  // InvalidArgumentError): holders keep their permits, waiters that now fit are admitted (their
  // number is returned). Others built with the old capacity get a ConfigError at their next acquire.
  std::uint32_t resize(std::uint32_t capacity) {
    checkCapacity(capacity, "resize");
    return doResize(capacity);
  }

  // Permits free now, by the backend's count (one round trip): the stored capacity less those of
  // live holders.
  [[nodiscard]] std::uint32_t availablePermits() {
    const SemaphoreInfo info = inspect();
    const std::uint32_t stored = info.capacity != 0 ? info.capacity : capacity();
    return stored > info.inUse ? stored - info.inUse : 0;
  }
  // Holders, waiters and the stored capacity (one round trip), as `dlock status` shows them.
  [[nodiscard]] SemaphoreInfo inspect() { return doInspect(); }

  // The capacity this object was built with, or resized to.
  [[nodiscard]] std::uint32_t capacity() const noexcept { return doCapacity(); }
  [[nodiscard]] const std::string& name() const noexcept { return doName(); }

  // Registers a handler for permit leases found ended (replaces the previous one).
  void onPermitsLost(LostHandler handler) { doOnPermitsLost(std::move(handler)); }
  [[nodiscard]] LockStats stats() const { return doStats(); }

  // From 1 to kMaxSemaphorePermits, else InvalidArgumentError naming `operation`.
  static void checkCapacity(std::uint32_t capacity, const char* operation) {
    if (capacity == 0 || capacity > kMaxSemaphorePermits) {
      throw InvalidArgumentError(std::string("dlock: Semaphore ") + operation + ": a capacity of " +
                                 std::to_string(capacity) + ", not from 1 to " + std::to_string(kMaxSemaphorePermits) +
                                 " (dlock::kMaxSemaphorePermits)");
    }
  }

 protected:
  Semaphore() = default;

  static constexpr Deadline kTryOnce = Deadline::min();
  static constexpr Deadline kNoDeadline = Deadline::max();
  static inline const CancelToken kNeverCancelled{};

 private:
  void check(std::uint32_t permits, const char* operation) const {
    if (permits == 0 || permits > capacity()) {
      throw InvalidArgumentError(std::string("dlock: Semaphore ") + operation + " " + detail::quoteKey(name()) + ": " +
                                 std::to_string(permits) + " permits, not from 1 to the capacity " +
                                 std::to_string(capacity()));
    }
  }
  // kTryOnce for a timeout <= 0; kNoDeadline when now + timeout would not fit (as ILock's).
  static Deadline deadlineAfter(std::chrono::milliseconds timeout) {
    if (timeout.count() <= 0) return kTryOnce;
    const auto now = std::chrono::steady_clock::now();
    if (timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now)) return kNoDeadline;
    return now + timeout;
  }

  // The hooks; arguments are validated. `leaseTime` unset: the semaphore's own (or the watchdog);
  // `cancel` ends the wait (InterruptedError).
  virtual PermitLease doAcquire(std::uint32_t permits, Deadline deadline,
                                std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel) = 0;
  virtual void doClose() noexcept = 0;
  virtual std::uint32_t doResize(std::uint32_t capacity) = 0;
  virtual SemaphoreInfo doInspect() = 0;
  [[nodiscard]] virtual std::uint32_t doCapacity() const noexcept = 0;
  [[nodiscard]] virtual const std::string& doName() const noexcept = 0;
  virtual void doOnPermitsLost(LostHandler handler) = 0;
  [[nodiscard]] virtual LockStats doStats() const = 0;
};

}  // namespace dlock
