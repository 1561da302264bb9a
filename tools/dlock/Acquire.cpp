// SPDX-License-Identifier: Apache-2.0
#include "Acquire.h"

#include <algorithm>
#include <string>
#include <thread>

#include "OutageBudget.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Backoff.h"
#include "dlock/uri.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

constexpr milliseconds kSlice{100};

// A fair wait (--fair, --read, --write) in one piece (waitInOnePiece), so the waiter keeps its place in the queue.
Acquired acquireFair(const std::shared_ptr<dlock::ILock>& lock, const CliOptions& options, Supervisor& supervisor) {
  auto [lease, interrupt] = waitInOnePiece<dlock::Lease>(
      [lock, options] {
        dlock::AcquireOptions wait;
        wait.waitTime = options.wait;
        return lock->acquire(options.key, wait);
      },
      supervisor);
  return {std::move(lease), interrupt};
}

// The error that ends a wait whose budget for an outage is spent.
dlock::ConnectionError spentBudget(const CliOptions& options, Steady::duration outage, milliseconds tolerance,
                                   const dlock::ConnectionError& last) {
  const std::string budget = options.wait ? std::string("to the end of the wait")
                                          : "the tolerance of a wait without --wait: " + formatDuration(tolerance);
  return dlock::ConnectionError("dlock: waiting for " + dlock::detail::quoteKey(options.key) + " on " +
                                dlock::redactUri(options.uri) + ": the backend stayed unreachable for " +
                                std::to_string(std::chrono::duration_cast<milliseconds>(outage).count()) + " ms (" +
                                budget + "); last: " + last.what());
}

// The wait in slices, each an acquire of at most kSlice, so a signal is noticed between them and
// a key the last slice got is released before dlock dies by the signal. A ConnectionError inside
// a slice ends only that slice: the next one comes after a pause from one back-off schedule for
// the whole wait, as long as the OutageBudget has time left; the last try is made at the wait's
// deadline.
Acquired acquireInSlices(dlock::ILock& lock, const CliOptions& options, Supervisor& supervisor,
                         milliseconds outageTolerance) {
  const bool bounded = options.wait.has_value();
  const Steady::time_point deadline = bounded ? Steady::now() + *options.wait : OutageBudget::kNone;
  OutageBudget budget(deadline, outageTolerance);
  dlock::detail::Backoff backoff(milliseconds(10), milliseconds(500));  // OutageRetry's schedule
  for (;;) {
    if (std::optional<int> signo = supervisor.takeInterrupt()) return {dlock::Lease(), signo};
    dlock::AcquireOptions slice;
    slice.waitTime = kSlice;
    if (bounded) {
      const auto left = std::chrono::ceil<milliseconds>(deadline - Steady::now());
      slice.waitTime = std::clamp(left, milliseconds(0), kSlice);  // 0 on the last: one more try
    }
    dlock::Lease lease;
    try {
      lease = lock.acquire(options.key, slice);
    } catch (const dlock::ConnectionError& error) {
      const Steady::time_point now = Steady::now();
      const Steady::time_point until = budget.failedAt(now);
      if (now >= until) throw spentBudget(options, budget.outageAt(now), outageTolerance, error);
      const auto pause = std::min(backoff.next(), std::chrono::ceil<milliseconds>(until - now));
      if (std::optional<int> signo = supervisor.waitForInterrupt(pause)) return {dlock::Lease(), signo};
      continue;
    }
    budget.answered();
    backoff.reset();
    if (lease || (bounded && Steady::now() >= deadline)) return {std::move(lease), std::nullopt};
  }
}

}  // namespace

Acquired acquireInterruptibly(const std::shared_ptr<dlock::ILock>& lock, const CliOptions& options,
                              Supervisor& supervisor, milliseconds outageTolerance) {
  const bool once = options.wait && options.wait->count() == 0;
  if (once) {
    dlock::AcquireOptions tryOnce;
    tryOnce.waitTime = milliseconds(0);
    return {lock->acquire(options.key, tryOnce), std::nullopt};
  }
  if (options.fair || options.access != Access::Exclusive) return acquireFair(lock, options, supervisor);
  return acquireInSlices(*lock, options, supervisor, outageTolerance);
}

}  // namespace dlock::cli
