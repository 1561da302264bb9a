// SPDX-License-Identifier: Apache-2.0
// FixedLease.h — ILock::extend and remainingLease over one lease, shared by the lock cores
// (LockCore, ReadWriteCore): a fixed-lease hold's end moved by one extendAll of its backend (the
// exclusive key, a read-write side, a semaphore's permits), and what is left of a lease locally.
// Thread safety: as the lease and backend given.
#pragma once

#include <chrono>

#include "LeaseState.h"
#include "LockCounters.h"
#include "dlock/Clock.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

// Moves `lease`'s end (and its local deadline) to `ttl` from now through `backend`.
// NotOwnerError for a parent's lease after fork(); InvalidArgumentError for a lease the watchdog
// renews; LockLostError (counted in `counters`) when it had ended; ConnectionError leaves it as it was.
void extendFixedLease(LeaseState& lease, IOperator& backend, const Clock& clock, LockCounters& counters,
                      std::chrono::milliseconds ttl);

// The lease's local deadline minus now; zero once ended.
[[nodiscard]] std::chrono::milliseconds remainingOf(const LeaseState& lease, const Clock& clock);

}  // namespace dlock::detail
