// SPDX-License-Identifier: Apache-2.0
// CleanupLane.h — cleanup that must follow a wait but must not hold its caller past the deadline
// (DESIGN.md, "Cancel that cannot land late"): cancelling an acquire whose outcome is unknown,
// leaving a fair queue. Tasks run in order on one thread, started with the first task; each is
// bounded by the backend's own timeouts. stop() runs what is queued, then joins.
// Owner: one LockCore (a forked child makes its own). Thread safety: thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "dlock/detail/CallBudget.h"

namespace dlock::detail {

class CleanupLane {
 public:
  using Task = std::function<bool()>;  // true when done; must not throw

  CleanupLane() = default;
  CleanupLane(const CleanupLane&) = delete;
  CleanupLane& operator=(const CleanupLane&) = delete;
  ~CleanupLane() { stop(); }

  // Runs `task` now within `deadline` (a CallBudget deadline; max for none), and again on the
  // lane when that failed: cleanup never holds the caller past its deadline (plus CallBudget's
  // floor).
  void runWithin(CallBudget::TimePoint deadline, Task task);
  // Queues `task`; after stop(), runs it on the calling thread instead.
  void post(Task task);
  // Runs the queued tasks to the end and joins the thread. Idempotent.
  void stop();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Task> tasks_;  // guarded by mutex_
  bool stopping_ = false;   // guarded by mutex_
  std::thread thread_;      // started under mutex_
};

}  // namespace dlock::detail
