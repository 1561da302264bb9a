// SPDX-License-Identifier: Apache-2.0
#include "ConnectionPool.h"

#include <algorithm>

#include "Errors.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Log.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

ConnectionPool::ConnectionPool(ConnectionOptions connection, PoolOptions pool)
    : connection_(std::move(connection)), pool_(pool), address_(connection_.address()) {
  if (pool_.size == 0) throw ConfigError("dlock: the pool size of " + address_ + " must be at least 1");
}

ConnectionPool::~ConnectionPool() = default;

std::unique_ptr<Connection> ConnectionPool::open() {
  try {
    auto connection = std::make_unique<Connection>(connection_);
    if (connectFailed()) confirmServes(*connection);
    std::lock_guard<std::mutex> guard(mutex_);
    if (failedSince_) {
      reconnects_.fetch_add(1, std::memory_order_relaxed);
      logger()->warn("dlock: reconnected to {}", address_);
    }
    failures_ = 0;
    failedSince_ = false;
    return connection;
  } catch (const ConnectionError& error) {
    std::lock_guard<std::mutex> guard(mutex_);
    ++failures_;
    failedSince_ = true;
    lastError_ = error.what();
    retryAt_ = std::chrono::steady_clock::now() + reconnectDelay(pool_, failures_);
    throw;
  }
}

bool ConnectionPool::connectFailed() {
  std::lock_guard<std::mutex> guard(mutex_);
  return failures_ > 0;
}

// After failed connects, a reconnect is reported once the server answers, not when a socket opens:
// a server that came back refusing us (NOAUTH, LOADING) must not log "reconnected" just before the
// error saying so. (After a connection that broke in use, the next command tells soon enough, and
// a PING there would cost every reconnect a round trip.)
void ConnectionPool::confirmServes(Connection& connection) {
  const ReplyPtr reply = connection.command({"PING"});
  if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, "PING on " + address_);
}

ConnectionPool::Handle ConnectionPool::borrow() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> guard(mutex_);
  // A call inside a timed wait waits for a connection no longer than the wait has left.
  const Clock::time_point budget = CallBudget::current();
  const bool forever = pool_.waitTimeout.count() == 0 && budget == Clock::time_point::max();
  const std::chrono::milliseconds wait = CallBudget::cap(pool_.waitTimeout);
  const auto deadline = forever ? Clock::time_point::max() : Clock::now() + wait;
  // Waits for a connection to come back (or, `orSlot`, a slot to open) until `until`; a cancel of
  // the wait the call runs in ends it (Wakeup.h). True when one did.
  const auto awaitFreed = [&](Clock::time_point until, bool orSlot) {
    const bool freed = Wakeup::waitUntil(freed_, guard, until,
                                         [&] { return !idle_.empty() || (orSlot && open_ < pool_.size); });
    if (Wakeup::woken()) throw InterruptedError("dlock: waiting for a connection to " + address_ + ": the wait was cancelled");
    return freed;
  };
  while (true) {
    if (!idle_.empty()) {
      std::unique_ptr<Connection> connection = std::move(idle_.back());
      idle_.pop_back();
      return Handle(*this, std::move(connection), true);
    }
    if (open_ < pool_.size) {
      if (failures_ > 0 && Clock::now() < retryAt_) {
        // The back-off keeps callers without a budget from piling onto a dead server. A wait with
        // budget left is never answered from this memory: it waits the back-off out, or until its
        // deadline, and then really connects (its last attempt, cut to the floor CallBudget gives).
        if (budget == Clock::time_point::max()) throw ConnectionError(lastError_ + " (retrying after a back-off)");
        const auto until = std::min(retryAt_, budget);
        if (Clock::now() < until) {
          (void)awaitFreed(until, false);  // or a connection comes back
          continue;
        }
      }
      ++open_;
      guard.unlock();
      try {
        return Handle(*this, open(), false);
      } catch (...) {
        guard.lock();
        --open_;
        freed_.notify_one();
        throw;
      }
    }
    if (!awaitFreed(deadline, true) && !forever && Clock::now() >= deadline) {
      throw ConnectionError("dlock: no free connection to " + address_ + " within " +
                            std::to_string(wait.count()) + " ms (pool of " +
                            std::to_string(pool_.size) + ")");
    }
  }
}

void ConnectionPool::giveBack(std::unique_ptr<Connection> connection) {
  const bool timedOut = connection->timedOut();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (connection->broken()) {
      --open_;
      failedSince_ = true;
      connection.reset();
      // Closed or reset under us (not timed out): the server restarted, or a link to it broke, so
      // the idle connections opened before went with it. Dropped now, the call's one retry opens
      // a fresh connection instead of taking another dead one.
      if (!timedOut) {
        open_ -= idle_.size();
        idle_.clear();
      }
    } else {
      idle_.push_back(std::move(connection));
    }
  }
  freed_.notify_one();
}

}  // namespace dlock::detail
