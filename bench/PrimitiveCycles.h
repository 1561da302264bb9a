// SPDX-License-Identifier: Apache-2.0
// PrimitiveCycles.h — what the read-write and semaphore benchmarks time, each in one small
// function over the backend surfaces (IReadWriteOperator, ISemaphoreOperator) that the one
// backend of `dlock::connect(uri)` offers on a single Redis: a read, a write and a permit cycle
// (acquire + release), a permit acquisition that waits its turn, and a reader queued behind a
// writer. Once the ReadWriteLock and Semaphore classes exist, these functions are the only place
// to point at them (`rw->readLock()->lock(name)`, `sem->acquire(1, options)`); the benchmarks
// around them stay as they are.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "dlock/IOperator.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/connect.h"
#include "dlock/core/Token.h"

namespace dlock::bench {

// As LockBuilder's defaults would send them: a lease long enough that no watchdog runs, and a
// waiter lease (a lock() may wait, so its attempt always offers to queue).
inline constexpr std::chrono::milliseconds kPrimitiveLease{30'000};
inline constexpr std::chrono::milliseconds kWaiterLease{5'000};

// The read-write and semaphore surfaces of one backend (a single Redis offers both).
struct Primitives {
  explicit Primitives(const std::string& uri)
      : backend(dlock::connect(uri)),
        readWrite(dynamic_cast<IReadWriteOperator&>(*backend)),
        semaphore(dynamic_cast<ISemaphoreOperator&>(*backend)) {}
  std::shared_ptr<IOperator> backend;
  IReadWriteOperator& readWrite;
  ISemaphoreOperator& semaphore;
};

inline void require(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("bench: ") + what);
}

// One uncontended read cycle on `name`: a fresh token (as a lock makes one per hold), acquire,
// release. The read-write lock's readLock()->lock(name) and unlock(name).
inline void readCycle(IReadWriteOperator& rw, const std::string& name) {
  const std::string token = generateToken();
  require(rw.acquireRead(name, token, kPrimitiveLease, kWaiterLease).acquired, "a read was not granted at once");
  require(rw.releaseRead(name, token).released, "a read release found nothing to release");
}

// A write hold taken at once (writeLock()->lock(name) on a free name); returns its token.
inline std::string acquireWrite(IReadWriteOperator& rw, const std::string& name) {
  const std::string token = generateToken();
  require(rw.acquireWrite(name, token, kPrimitiveLease, kWaiterLease).acquired, "a write was not granted at once");
  return token;
}

// Its release (writeLock()->unlock(name)): how many queued waiters it admitted, in one script.
inline std::uint32_t releaseWrite(IReadWriteOperator& rw, const std::string& name, const std::string& token) {
  const ReleaseResult released = rw.releaseWrite(name, token);
  require(released.released, "a write release found nothing to release");
  return released.notified;
}

// One uncontended write cycle: writeLock()->lock(name) and unlock(name).
inline void writeCycle(IReadWriteOperator& rw, const std::string& name) {
  (void)releaseWrite(rw, name, acquireWrite(rw, name));
}

// One uncontended permit cycle of a semaphore of `capacity`: acquire(1) and release().
inline void permitCycle(ISemaphoreOperator& semaphore, const std::string& name, std::uint32_t capacity) {
  const std::string token = generateToken();
  require(semaphore.acquirePermits(name, token, 1, capacity, kPrimitiveLease, kWaiterLease).acquired,
          "a permit was not granted at once");
  require(semaphore.releasePermits(name, token).released, "a permit release found nothing to release");
}

// Waits for a grant on `grants` answering the try the server saw at `triedAt` (its clock, ms):
// Granted, or None/Recheck after `timeout` (then the caller tries again, which renews its place).
inline Grant grantAnswering(IGrantWatch& grants, std::int64_t triedAt, std::chrono::milliseconds timeout) {
  Grant grant = grants.waitForGrant(timeout);
  while (grant.kind == Grant::Kind::Granted && grant.backendMillis < triedAt) {
    grant = grants.waitForGrant(std::chrono::milliseconds(0));  // answered an earlier try: dropped
  }
  return grant;
}

// One permit of `name`, waited for as the fair lock waits for a key (FairAttempt): listen for
// grants first, try (queued when it does not fit), and on a grant hold the permit only once
// extendPermits says it is this token's; on silence try again. sem->acquire(1). Returns the token.
inline std::string acquirePermitWaiting(ISemaphoreOperator& semaphore, const std::string& name, std::uint32_t capacity) {
  const std::string token = generateToken();
  const std::unique_ptr<IGrantWatch> grants = semaphore.watchPermitGrants(name, token);
  while (true) {
    const SemaphoreAcquireResult tried =
        semaphore.acquirePermits(name, token, 1, capacity, kPrimitiveLease, kWaiterLease);
    if (tried.acquired) return token;
    const Grant grant = grantAnswering(*grants, tried.backendMillis, kWaiterLease / 2);
    if (grant.kind == Grant::Kind::Granted && semaphore.extendPermits(name, token, kPrimitiveLease)) return token;
  }
}

// Its release: p.release().
inline void releasePermit(ISemaphoreOperator& semaphore, const std::string& name, const std::string& token) {
  require(semaphore.releasePermits(name, token).released, "a permit release found nothing to release");
}

// A read hold that may wait (readLock()->lock(name)), as acquirePermitWaiting waits. `heardAt`
// is set to the CLOCK_MONOTONIC ns at which the grant message arrived (0 when granted at once):
// the reader learns there that the release admitted it; the return is where it holds.
inline std::string acquireReadWaiting(IReadWriteOperator& rw, const std::string& name, long long& heardAt) {
  const std::string token = generateToken();
  const std::unique_ptr<IGrantWatch> grants = rw.watchReadWriteGrants(name, token);
  heardAt = 0;
  while (true) {
    const FairAcquireResult tried = rw.acquireRead(name, token, kPrimitiveLease, kWaiterLease);
    if (tried.acquired) return token;
    const Grant grant = grantAnswering(*grants, tried.backendMillis, kWaiterLease / 2);
    if (grant.kind != Grant::Kind::Granted) continue;
    heardAt = std::chrono::steady_clock::now().time_since_epoch().count();
    if (rw.extendReadWrite({name, token, ReadWriteMode::Read}, kPrimitiveLease)) return token;
  }
}

// Its release: readLock()->unlock(name).
inline void releaseRead(IReadWriteOperator& rw, const std::string& name, const std::string& token) {
  require(rw.releaseRead(name, token).released, "a read release found nothing to release");
}

}  // namespace dlock::bench
