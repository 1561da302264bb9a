// Watchdog.h — the lease renewer of one lock: one thread, however many leases.
//
// Every third of the watchdog lease it extends every registered lease in one extendAll() call
// (one round trip per connection), so renewal traffic does not grow with the number of held keys.
// A lease the backend no longer has for us is marked lost and reported through `onLost`; a lease
// whose renewals keep failing is marked lost once its local deadline passes. Leases marked
// finished (released, abandoned) are dropped at the next tick.
// Owner: the lock core. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "LeaseState.h"
#include "LockCounters.h"
#include "dlock/Clock.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

class Watchdog {
 public:
  using LostCallback = std::function<void(const LeaseState&)>;

  Watchdog(std::shared_ptr<IOperator> backend, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
           LockCounters& counters, LostCallback onLost);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

  // Starts renewing `lease` (the thread starts with the first one).
  void add(std::shared_ptr<LeaseState> lease);

  [[nodiscard]] std::chrono::milliseconds interval() const noexcept { return interval_; }

 private:
  void run();
  void renew(const std::vector<std::shared_ptr<LeaseState>>& batch);
  void markLost(LeaseState& lease, const char* why);

  const std::shared_ptr<IOperator> backend_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds interval_;
  LockCounters& counters_;
  const LostCallback onLost_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::shared_ptr<LeaseState>> leases_;  // guarded by mutex_
  Clock::time_point nextTick_ = Clock::time_point::max();  // guarded by mutex_
  bool stopping_ = false;                            // guarded by mutex_
  bool running_ = false;                             // guarded by mutex_; the thread has started
  std::thread thread_;                               // started under mutex_
};

}  // namespace dlock::detail
