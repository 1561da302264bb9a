// SPDX-License-Identifier: Apache-2.0
// CleanupLane.h — cleanup that must follow a wait but must not hold its caller past the deadline
// (DESIGN.md, "Cancel that cannot land late"): cancelling an acquire whose outcome is unknown,
// leaving a fair queue, freeing a hold given up in doubt. Tasks run on one thread, started with
// the first task; each run is bounded by the backend's own timeouts. A task that fails runs again
// after a back-off (10 ms doubling to 1 s) until it succeeds or kGiveUpAfter has passed since it
// was posted, when the lane says so in a warning: never dropped in silence. stop() gives each
// queued task one more run (warning of those that still fail), then joins.
// Owner: one LockCore (a forked child makes its own). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "dlock/detail/CallBudget.h"

namespace dlock::detail {

class CleanupLane {
 public:
  using Task = std::function<bool()>;  // true when done; must not throw
  using Clock = std::chrono::steady_clock;
  // By then the leases a task frees have ended on their own (the default lease is 30 s).
  static constexpr std::chrono::seconds kGiveUpAfter{60};

  CleanupLane() = default;
  CleanupLane(const CleanupLane&) = delete;
  CleanupLane& operator=(const CleanupLane&) = delete;
  ~CleanupLane() { stop(); }

  // Runs `task` now within `deadline` (a CallBudget deadline; max for none), and on the lane when
  // that failed: cleanup never holds the caller past its deadline (plus CallBudget's floor).
  // `what` names the task in the lane's warning ("cancelling 'k' on redis://...").
  void runWithin(CallBudget::TimePoint deadline, Task task, std::string what = "a clean-up after a wait");
  // Queues `task`; after stop(), runs it on the calling thread instead.
  void post(Task task, std::string what = "a clean-up after a wait");
  // Gives each queued task one more run, then joins the thread. Idempotent.
  void stop();

 private:
  struct Pending {
    Task task;
    std::string what;
    Clock::time_point postedAt;
    Clock::time_point dueAt;
    std::chrono::milliseconds backoff{10};
  };
  void run();
  // Runs one task; false when it is to run again (it failed, and may still).
  static bool runOnce(Pending& pending, bool last) noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> tasks_;  // guarded by mutex_
  bool stopping_ = false;      // guarded by mutex_
  std::thread thread_;         // started under mutex_
};

}  // namespace dlock::detail
