// Watchdog.h — the lease renewer of one lock: one thread, however many leases.
//
// Every third of the watchdog lease it extends every registered lease in one extendAll() call
// (one round trip per connection), so renewal traffic does not grow with the number of held keys.
// A renewed lease's deadline moves to the time the renewal was sent plus the validity the backend
// reported, as at acquisition. A lease the backend no longer has for us is marked lost and
// reported to the lost handler; a lease whose renewals keep failing is marked lost once its local
// deadline passes. A lease being released is left to its release: a renewal that finds it gone
// may be seeing that release. Leases marked finished (released, abandoned) are dropped at the
// next tick.
//
// Ownership: the lock core holds the watchdog by shared_ptr and so does the watchdog's thread,
// which runs the lost handler. The handler may drop the last reference to the lock (and so to
// the core): stop() then runs on this very thread, which it lets finish on its own instead of
// joining itself, and the thread keeps the watchdog alive until it is done.
// Owner: the lock core and the watchdog's thread. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "LeaseState.h"
#include "LockCounters.h"
#include "dlock/Clock.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

class Watchdog : public std::enable_shared_from_this<Watchdog> {
 public:
  Watchdog(std::shared_ptr<IOperator> backend, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
           std::shared_ptr<LockCounters> counters);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

  // Starts renewing `lease` (the thread starts with the first one).
  void add(std::shared_ptr<LeaseState> lease);

  // The handler of leases found lost (replaces the previous one); runs on the watchdog's thread.
  void setLostHandler(ILock::LostHandler handler);

  // Stops renewing; no handler runs after it returns (unless called from the handler). Joins the
  // thread, or, called on the thread itself, lets it end when the handler returns. Idempotent.
  void stop();

  [[nodiscard]] std::chrono::milliseconds interval() const noexcept { return interval_; }

 private:
  void run();
  void renew(const std::vector<std::shared_ptr<LeaseState>>& batch);
  void markLost(LeaseState& lease, const char* why);

  const std::shared_ptr<IOperator> backend_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds interval_;
  const std::shared_ptr<LockCounters> counters_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<LeaseState>> leases_;  // guarded by mutex_
  ILock::LostHandler lostHandler_;                   // guarded by mutex_
  Clock::time_point nextTick_ = Clock::time_point::max();  // guarded by mutex_
  bool stopping_ = false;                            // guarded by mutex_
  bool running_ = false;                             // guarded by mutex_; the thread has started
  std::thread thread_;                               // started under mutex_
};

}  // namespace dlock::detail
