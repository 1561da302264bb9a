// SPDX-License-Identifier: Apache-2.0
// LossNotifier.h — runs the lock-lost handler on a thread of its own, so a slow handler never
// delays the renewal of other leases (the watchdog only queues the notice).
//
// One thread, started with the first notice; notices run in the order they were queued. The
// handler may drop the last reference to the lock (and so to this notifier): stop() then runs on
// this very thread, which it lets finish on its own instead of joining itself; the thread keeps
// the notifier alive until it is done. After stop() returns (called from elsewhere), no handler
// runs and queued notices are dropped.
// Owner: the watchdog, and the notifier's thread. Thread safety: thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dlock/ILock.h"

namespace dlock::detail {

class LossNotifier : public std::enable_shared_from_this<LossNotifier> {
 public:
  LossNotifier() = default;
  LossNotifier(const LossNotifier&) = delete;
  LossNotifier& operator=(const LossNotifier&) = delete;
  ~LossNotifier();

  // The handler of later notices (replaces the previous one).
  void setHandler(ILock::LostHandler handler);
  // Queues a notice of `key` lost with `fencingToken`; returns at once.
  void notify(std::string key, std::uint64_t fencingToken);
  // Idempotent; see above.
  void stop();

 private:
  struct Notice {
    std::string key;
    std::uint64_t fencingToken;
  };
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  ILock::LostHandler handler_;  // guarded by mutex_
  std::deque<Notice> queue_;    // guarded by mutex_
  bool stopping_ = false;       // guarded by mutex_
  std::thread thread_;          // started under mutex_
};

}  // namespace dlock::detail
