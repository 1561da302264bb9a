// SPDX-License-Identifier: Apache-2.0
// ConnectionPool.h — a small pool of connections to one server.
//
// Connections open on demand up to PoolOptions::size. borrow() waits at most waitTimeout for a
// free one (cut to the budget of the wait it runs inside, CallBudget.h). A connection that failed
// is discarded when returned, and with it the idle ones when it was closed or reset rather than
// timed out (they shared its fate); after a failed connect the next attempt waits out a back-off
// (doubling up to maxReconnectBackoff). Meanwhile a caller without a budget fails fast with the
// stored ConnectionError, so callers do not pile up on a dead server; a caller with a budget
// waits the back-off out (or until its deadline) and then really connects.
// run() tries an operation again on a fresh connection when a pooled one turns out dead (the
// server restarted while it sat idle), as RetryPolicy decides.
// Owner: one operator. Thread safety: thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "Connection.h"
#include "RetryPolicy.h"
#include "dlock/LockError.h"
#include "dlock/common/RedisOptions.h"
#include "dlock/detail/Backoff.h"

namespace dlock::detail {

// How long to wait before connecting again after `failures` consecutive failures: the base
// back-off doubled per failure, capped (the library's one schedule, see Backoff.h).
[[nodiscard]] inline std::chrono::milliseconds reconnectDelay(const PoolOptions& options, unsigned failures) {
  return Backoff::afterFailures(options.reconnectBackoff, options.maxReconnectBackoff, failures);
}

class ConnectionPool {
 public:
  // A borrowed connection, returned to the pool on destruction.
  class Handle {
   public:
    Handle(ConnectionPool& pool, std::unique_ptr<Connection> connection, bool reused)
        : pool_(&pool), connection_(std::move(connection)), reused_(reused) {}
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    Handle(Handle&& other) noexcept = default;
    Handle& operator=(Handle&&) = delete;
    ~Handle() {
      if (connection_) pool_->giveBack(std::move(connection_));
    }
    Connection& operator*() const noexcept { return *connection_; }
    Connection* operator->() const noexcept { return connection_.get(); }
    // True when the connection had served before and sat idle in the pool.
    [[nodiscard]] bool reused() const noexcept { return reused_; }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<Connection> connection_;
    bool reused_;
  };

  ConnectionPool(ConnectionOptions connection, PoolOptions pool);
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;
  ~ConnectionPool();

  // A connection; ConnectionError when the server cannot be reached or none frees up in time.
  Handle borrow();

  // Calls `operation(Connection&)` on a borrowed connection; a reused one found dead is replaced
  // as RetryPolicy says (once: the command never reached the server).
  template <class Operation>
  auto run(Operation&& operation) -> decltype(operation(std::declval<Connection&>())) {
    RetryPolicy policy(std::chrono::milliseconds(0));
    while (true) {
      Handle handle = borrow();
      try {
        return operation(*handle);
      } catch (const ConnectionError&) {
        const bool stale = handle.reused() && handle->broken() && !handle->timedOut();
        if (policy.afterFailure(stale ? Failure::Stale : Failure::Io, Next::Final) == RetryPolicy::Step::GiveUp) throw;
      }
    }
  }

  [[nodiscard]] const std::string& address() const noexcept { return address_; }
  [[nodiscard]] const ConnectionOptions& connectionOptions() const noexcept { return connection_; }
  // Connections opened after an earlier one failed.
  [[nodiscard]] std::uint64_t reconnects() const noexcept { return reconnects_.load(std::memory_order_relaxed); }

 private:
  void giveBack(std::unique_ptr<Connection> connection);
  std::unique_ptr<Connection> open();
  bool connectFailed();                        // the last connect attempt failed
  void confirmServes(Connection& connection);  // PING; throws the error reply's error

  const ConnectionOptions connection_;
  const PoolOptions pool_;
  const std::string address_;

  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<Connection>> idle_;  // guarded by mutex_
  std::size_t open_ = 0;                           // guarded by mutex_; idle + lent + connecting
  unsigned failures_ = 0;                          // guarded by mutex_; consecutive
  std::chrono::steady_clock::time_point retryAt_;  // guarded by mutex_
  std::string lastError_;                          // guarded by mutex_
  bool failedSince_ = false;                       // guarded by mutex_; next success is a reconnect
  std::atomic<std::uint64_t> reconnects_{0};
};

}  // namespace dlock::detail
