// SPDX-License-Identifier: Apache-2.0
// Acquire.h — how `dlock` waits for its key: SIGINT, SIGTERM or SIGHUP while it waits is noticed
// within a slice (100 ms), and an outage of the backend is ridden out within one budget for the
// whole wait (OutageBudget.h), not one per slice.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "CliArgs.h"
#include "Supervisor.h"
#include "dlock/ILock.h"

namespace dlock::cli {

// A wait in one piece, so the waiter keeps its place in a queue (slices would each leave it and
// join again at the end): `acquire`, one acquire of the library returning `Held`, runs on a thread
// of its own while this one watches for signals. What it got, or an empty `Held` and the signal.
// The library rides out an outage within the wait's budget itself (one acquire, one budget). An
// interrupted wait is abandoned with the process, which dies by the signal: its place ends with
// its waiter lease, and a grant that reached it with the rest of that lease.
template <class Held, class Acquire>
std::pair<Held, std::optional<int>> waitInOnePiece(Acquire acquire, Supervisor& supervisor) {
  auto result = std::make_shared<std::promise<Held>>();
  std::future<Held> done = result->get_future();
  std::thread worker([acquire = std::move(acquire), result] {
    try {
      result->set_value(acquire());
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  });
  while (done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (std::optional<int> signo = supervisor.takeInterrupt()) {
      worker.detach();
      return {Held(), signo};
    }
  }
  // Done but for its own clean-up, which the join orders before this thread reads the outcome: an
  // exception's last reference may be the worker's, counted inside libstdc++ where TSan cannot see
  // the order, and it reported the worker freeing the exception as racing the message's read.
  worker.join();
  return {done.get(), std::nullopt};
}

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
