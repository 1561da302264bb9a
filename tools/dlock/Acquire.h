// SPDX-License-Identifier: Apache-2.0
// Acquire.h — how `dlock` waits for its key: SIGINT, SIGTERM or SIGHUP while it waits is noticed
// within a slice (100 ms), and an outage of the backend is ridden out within one budget for the
// whole wait (OutageBudget.h), not one per slice.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "CliArgs.h"
#include "Supervisor.h"
#include "dlock/ILock.h"

namespace dlock::cli {

struct Acquired {
  dlock::Lease lease;            // empty: not had in time, or interrupted
  std::optional<int> interrupt;  // the signal that ended the wait
};

// Waits for options.key as options.wait and options.fair say. ConnectionError when the backend
// stayed unreachable past the budget: the wait's deadline, or `outageTolerance` of an outage for
// a wait without one (--no-wait: at the first failure). A --fair wait is one acquire of the
// library, on a thread of its own, which rides out an outage within the same budget itself.
[[nodiscard]] Acquired acquireInterruptibly(const std::shared_ptr<dlock::ILock>& lock, const CliOptions& options,
                                            Supervisor& supervisor, std::chrono::milliseconds outageTolerance);

}  // namespace dlock::cli
