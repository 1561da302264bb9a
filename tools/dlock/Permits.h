// SPDX-License-Identifier: Apache-2.0
// Permits.h — `dlock --permits N --capacity C`: the semaphore KEY instead of the lock. The wait for
// permits, and the lines `dlock status` prints for a semaphore.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "CliArgs.h"
#include "Supervisor.h"
#include "dlock/IOperator.h"
#include "dlock/core/Semaphore.h"

namespace dlock::cli {

struct AcquiredPermits {
  dlock::PermitLease permits;    // empty: not had in time, or interrupted
  std::optional<int> interrupt;  // the signal that ended the wait
};

// The semaphore of options.key over `backend`: options.permits->capacity, the watchdog at options.ttl.
[[nodiscard]] std::shared_ptr<dlock::Semaphore> makeSemaphore(const std::shared_ptr<dlock::IOperator>& backend,
                                                              const CliOptions& options,
                                                              std::chrono::milliseconds outageTolerance);

// Waits for options.permits->count permits as options.wait says: --no-wait tries once; otherwise
// one acquire of the library (waitInOnePiece), which keeps the waiter's place in the queue.
[[nodiscard]] AcquiredPermits acquirePermitsInterruptibly(const std::shared_ptr<dlock::Semaphore>& semaphore,
                                                          const CliOptions& options, Supervisor& supervisor);

// `dlock status` of a semaphore (`backend` keeps one named options.key): its lines, and whether any
// permit is held; nullopt when `backend` keeps no semaphore of that name.
struct SemaphoreStatus {
  std::string text;
  bool inUse = false;
};
[[nodiscard]] std::optional<SemaphoreStatus> semaphoreStatus(dlock::IOperator& backend, const CliOptions& options);

// `dlock resize KEY N`: stores options.capacity for the semaphore options.key when a capacity is
// stored for it; its lines (the capacity before and after, the waiters admitted, how long it is
// kept), or nullopt when none is stored (nothing sent but the look). ConfigError when `backend`
// keeps no semaphores.
[[nodiscard]] std::optional<std::string> resizeSemaphore(dlock::IOperator& backend, const CliOptions& options);

// How long a stored capacity lasts, for the help, the resize's lines and the docs.
inline constexpr const char* kCapacityLifetime =
    "fence_ttl (24h by default) from the semaphore's last change, renewed once less than half is left: "
    "12h to 24h after the last acquire, renewal, release or resize, never less than its last lease";

}  // namespace dlock::cli
