// SPDX-License-Identifier: Apache-2.0
// WaiterQueue.h — the threads of one lock waiting for the same key, in arrival order.
//
// Only the thread at the head of a key's queue polls the backend and listens for its release;
// the others wait here without any network traffic. So a release wakes one waiter per process,
// not a herd, and threads of one process get the key in the order they asked for it.
// Owner: one LockCore. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

class WaiterQueue {
 public:
  // A place in a key's queue, left on destruction.
  class Ticket {
   public:
    // Joins the end of `key`'s queue.
    Ticket(WaiterQueue& queue, std::string_view key)
        : queue_(&queue), key_(key), number_(queue.enqueue(key_, first_)) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { queue_->leave(key_, number_); }

    // Blocks until this ticket heads its queue (true), or `deadline` passes or the wait is
    // woken (Wakeup.h) first (false).
    bool waitForTurn(std::chrono::steady_clock::time_point deadline) { return queue_->waitForTurn(key_, number_, deadline); }
    // True when the ticket headed its queue as it joined: no waiter of this process was ahead.
    [[nodiscard]] bool first() const noexcept { return first_; }

   private:
    WaiterQueue* queue_;
    std::string key_;
    bool first_ = false;
    std::uint64_t number_;
  };

 private:
  std::uint64_t enqueue(const std::string& key, bool& first) {
    std::lock_guard<std::mutex> guard(mutex_);
    const std::uint64_t number = ++lastTicket_;
    auto& queue = queues_[key];
    first = queue.empty();
    queue.push_back(number);
    return number;
  }

  bool waitForTurn(const std::string& key, std::uint64_t number, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> guard(mutex_);
    const auto atHead = [&] { return queues_.at(key).front() == number; };
    return Wakeup::waitUntil(turn_, guard, deadline, atHead);  // false when woken (a cancel)
  }

  void leave(const std::string& key, std::uint64_t number) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      const auto it = queues_.find(key);
      if (it == queues_.end()) return;
      auto& queue = it->second;
      for (auto position = queue.begin(); position != queue.end(); ++position) {
        if (*position == number) {
          queue.erase(position);
          break;
        }
      }
      if (queue.empty()) queues_.erase(it);
    }
    turn_.notify_all();
  }

  std::mutex mutex_;
  std::condition_variable turn_;
  std::map<std::string, std::deque<std::uint64_t>, std::less<>> queues_;  // guarded by mutex_
  std::uint64_t lastTicket_ = 0;                                          // guarded by mutex_
};

}  // namespace dlock::detail
