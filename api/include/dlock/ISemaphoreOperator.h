// SPDX-License-Identifier: Apache-2.0
// ISemaphoreOperator.h — a backend that keeps a counting semaphore per name on the fair queue's
// hand-off: a capacity stored with it, permit holders each with their own lease (in the backend's
// time), and one FIFO queue of waiters (SemaphoreAcquireResult, SemaphoreInfo, ISemaphoreOperator).
// A backend without one queue per name (Redlock) does not offer it.
//
//   acquirePermits  a token spent already (released, or left) → refused; ours already → the same
//                   grant (what is left of its lease); another capacity stored → ConfigError naming
//                   both; nobody queued and the permits fit → taken, a new fencing token;
//                   otherwise, with a waiter lease, joined or kept in the queue
//   releasePermits  ours → the permits are free, and the queue's head waiters that fit now are
//                   admitted in the same step, in order, stopping at the first that does not fit
//   leavePermitQueue out of the queue; permits granted to it meanwhile are released (handed on),
//                   and a later attempt with the token is refused (a tombstone)
//   resizeSemaphore stores a new capacity; holders keep their permits, waiters that fit are admitted
//
// An admitted waiter holds its permits for a claim lease (its lease, or what is left of its waiter
// lease if less) and is told on its grant watch with a new fencing token; it extends the claim on
// hearing (a grant counts only when extendPermits says it is this token's). Holders whose lease
// ended and waiters whose waiter lease ended are reclaimed by every call, by the backend's clock:
// never by a client's. Releases leave a record per token, so a retried release is decided by
// evidence. Bad input is an InvalidArgumentError before anything is sent. Each hold is one
// token's; reentrancy is the caller's. Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock {

// The largest capacity of a semaphore: a bound on what one name may count, far above any real
// pool, so a capacity computed wrongly (a negative number cast) is refused rather than stored.
inline constexpr std::uint32_t kMaxSemaphorePermits = 1'000'000;

// The outcome of one acquire attempt.
struct SemaphoreAcquireResult {
  bool acquired = false;
  std::uint64_t fencingToken = 0;  // when acquired
  // When acquired: zero, the whole lease; ours already (a retry, a grant whose message is on its
  // way), what is left of it.
  std::chrono::milliseconds validity{0};
  std::uint32_t position = 0;  // when queued: 1 is next; 0 when not queued
  // The backend's clock (ms) when the attempt ran: with a Grant's time, it places a grant on the
  // caller's clock without trusting that the two clocks agree.
  std::int64_t backendMillis = 0;
  // When not acquired: time until the earliest lease or place of this semaphore ends (a holder's
  // lease end, or sooner), which bounds a waiter's sleep; zero when none.
  std::chrono::milliseconds nextExpiry{0};
};

// What the backend holds for one name (inspectSemaphore), for diagnostics and `dlock status`.
struct SemaphoreInfo {
  struct Holder {
    std::string token;
    std::uint32_t permits = 0;
    std::chrono::milliseconds remaining{0};
    std::uint64_t fencingToken = 0;
  };
  struct Waiter {
    std::string token;
    std::uint32_t permits = 0;
  };
  std::uint32_t capacity = 0;    // 0: no capacity stored (never used, or idle past its keys' life)
  std::uint32_t inUse = 0;       // permits of live holders
  std::vector<Holder> holders;   // live holders, by lease end
  std::vector<Waiter> waiters;   // live waiters, head first
};

class ISemaphoreOperator {
 public:
  ISemaphoreOperator() = default;
  ISemaphoreOperator(const ISemaphoreOperator&) = delete;
  ISemaphoreOperator& operator=(const ISemaphoreOperator&) = delete;
  virtual ~ISemaphoreOperator() = default;

  // One atomic attempt for `permits` of `name`, built with `capacity` (see the table above).
  // `waiterLease` zero: never queued (try once); otherwise the caller's place lasts `waiterLease`
  // from now unless this is called again. ConfigError when `name` is stored with another capacity.
  SemaphoreAcquireResult acquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                        std::uint32_t capacity, std::chrono::milliseconds lease,
                                        std::chrono::milliseconds waiterLease) {
    check(name, token, lease, "acquirePermits");
    checkCapacity(capacity, "acquirePermits");
    if (permits == 0 || permits > capacity) {
      throw InvalidArgumentError("dlock: acquirePermits " + detail::quoteKey(name) + ": " + std::to_string(permits) +
                                 " permits, not from 1 to the capacity " + std::to_string(capacity));
    }
    if (waiterLease.count() != 0) detail::checkLeaseTime(waiterLease, "the waiter lease", "acquirePermits");
    return doAcquirePermits(name, token, permits, capacity, lease, waiterLease);
  }

  // Release with hand-off: released, not ours (its lease ended, or never ours), or released
  // earlier by a try whose reply was lost (the backend's record of this token's release);
  // `notified` is how many waiters were admitted.
  ReleaseResult releasePermits(std::string_view name, std::string_view token) {
    check(name, token, "releasePermits");
    return doReleasePermits(name, token);
  }

  // True when `token` still holds its permits of `name`, whose lease now ends `lease` from now.
  bool extendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) {
    check(name, token, lease, "extendPermits");
    return doExtendPermits(name, token, lease);
  }
  // extendPermits for the watchdog's batch (LeaseRef::key is the semaphore's name): one entry per
  // lease, in order, as IOperator::extendAll (`unknown` when the backend could not be reached).
  std::vector<ExtendResult> extendPermitsAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds lease) {
    for (const auto& each : leases) check(each.key, each.token, lease, "extendPermits");
    return doExtendPermitsAll(leases, lease);
  }

  // Leaves the queue of `name` for good: `token` is not used again, and an attempt with it still on
  // its way is refused. True when permits had been granted to `token` meanwhile (or taken by an
  // attempt whose reply was lost) and were released now.
  bool leavePermitQueue(std::string_view name, std::string_view token) {
    check(name, token, "leavePermitQueue");
    return doLeavePermitQueue(name, token);
  }

  // Grant messages for `token` on `name`, taken before the attempt they follow.
  std::unique_ptr<IGrantWatch> watchPermitGrants(std::string_view name, std::string_view token) {
    check(name, token, "watchPermitGrants");
    return doWatchPermitGrants(name, token);
  }

  // Stores `capacity` for `name` (the one way to change it); returns how many waiters that admitted.
  std::uint32_t resizeSemaphore(std::string_view name, std::uint32_t capacity) {
    detail::checkKey(name, "resizeSemaphore");
    checkCapacity(capacity, "resizeSemaphore");
    return doResizeSemaphore(name, capacity);
  }

  // Reads the state of `name` without changing it.
  SemaphoreInfo inspectSemaphore(std::string_view name) {
    detail::checkKey(name, "inspectSemaphore");
    return doInspectSemaphore(name);
  }

  // Why this backend's configuration cannot serve a semaphore; empty when it can.
  [[nodiscard]] virtual std::string semaphoreUnsupported() const { return {}; }

 private:
  virtual SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                                  std::uint32_t capacity, std::chrono::milliseconds lease,
                                                  std::chrono::milliseconds waiterLease) = 0;
  virtual ReleaseResult doReleasePermits(std::string_view name, std::string_view token) = 0;
  virtual bool doExtendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) = 0;
  // By default one doExtendPermits per lease; a backend may batch them.
  virtual std::vector<ExtendResult> doExtendPermitsAll(const std::vector<LeaseRef>& leases,
                                                       std::chrono::milliseconds lease) {
    std::vector<ExtendResult> results(leases.size());
    for (std::size_t i = 0; i < leases.size(); ++i) {
      try {
        results[i].extended = doExtendPermits(leases[i].key, leases[i].token, lease);
      } catch (const ConnectionError&) {
        results[i].unknown = true;
      }
    }
    return results;
  }
  virtual bool doLeavePermitQueue(std::string_view name, std::string_view token) = 0;
  virtual std::unique_ptr<IGrantWatch> doWatchPermitGrants(std::string_view name, std::string_view token) = 0;
  virtual std::uint32_t doResizeSemaphore(std::string_view name, std::uint32_t capacity) = 0;
  virtual SemaphoreInfo doInspectSemaphore(std::string_view name) = 0;

  static void check(std::string_view name, std::string_view token, const char* operation) {
    detail::checkKey(name, operation);
    detail::checkToken(token, operation);
  }
  static void check(std::string_view name, std::string_view token, std::chrono::milliseconds lease,
                    const char* operation) {
    check(name, token, operation);
    detail::checkLeaseTime(lease, "the lease", operation);
  }
  static void checkCapacity(std::uint32_t capacity, const char* operation) {
    if (capacity == 0 || capacity > kMaxSemaphorePermits) {
      throw InvalidArgumentError(std::string("dlock: ") + operation + ": a capacity of " + std::to_string(capacity) +
                                 ", not from 1 to " + std::to_string(kMaxSemaphorePermits) +
                                 " (dlock::kMaxSemaphorePermits)");
    }
  }
};

namespace detail {

// The ConfigError of a semaphore stored with another capacity than the caller's (every backend
// words it alike): Curator let two clients count one semaphore to 10 and to 20, and Redisson's
// trySetPermits overwrote a live one (#4678); here the first user's capacity stands until resized.
[[noreturn]] inline void throwCapacityMismatch(std::string_view name, const std::string& backend, std::uint64_t stored,
                                               std::uint32_t asked) {
  throw ConfigError("dlock: semaphore " + detail::quoteKey(name) + " on " + backend + " is stored with capacity " +
                    std::to_string(stored) + ", not " + std::to_string(asked) +
                    "; Semaphore::resize (or the command `dlock resize " + std::string(name) + " " +
                    std::to_string(asked) + "`) changes it for every user; a stored capacity lasts " +
                    "fence_ttl (24h by default) from the semaphore's last change, renewed once less than " +
                    "half is left (12h to 24h after its last use)");
}

}  // namespace detail

}  // namespace dlock
