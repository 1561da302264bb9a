// SPDX-License-Identifier: Apache-2.0
// MemoryFairQueue.h — the waiters of one key of the memory operator's fair lock, in arrival
// order, each with its waiter lease on the operator's clock; and the hand-offs that the grant
// watches of this key have not heard yet. The memory twin of FairScripts.h's queue; the
// read-write lock's queue too (MemoryReadWrite.h), whose waiters say whether they read.
// Owner: one MemoryOperator key. Thread safety: not thread-safe (the operator's mutex guards it).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Clock.h"
#include "dlock/IFairOperator.h"

namespace dlock::detail {

class MemoryFairQueue {
 public:
  struct Waiter {
    std::string token;
    std::chrono::milliseconds ttl;  // the lease it gets when handed the key
    Clock::time_point leaseEnds;    // its waiter lease
    bool reader = false;            // a read-write lock's waiter for a read hold
  };

  // Drops waiters whose waiter lease has ended by `now`, but `keep`.
  void prune(Clock::time_point now, std::string_view keep) {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(),
                                  [&](const Waiter& w) { return w.leaseEnds <= now && w.token != keep; }),
                   waiters_.end());
  }

  // Forgets every waiter (a server restarted empty); grant watches stay.
  void clearWaiters() { waiters_.clear(); }

  [[nodiscard]] bool empty() const { return waiters_.empty(); }
  [[nodiscard]] std::size_t size() const { return waiters_.size(); }
  [[nodiscard]] bool heads(std::string_view token) const { return !waiters_.empty() && waiters_.front().token == token; }
  [[nodiscard]] const Waiter* front() const { return waiters_.empty() ? nullptr : &waiters_.front(); }
  [[nodiscard]] const std::deque<Waiter>& waiters() const { return waiters_; }
  void popFront() { waiters_.pop_front(); }

  // Joins the end of the queue, or renews the waiter lease of a place held already; returns the
  // place (1 is next).
  std::uint32_t join(std::string_view token, std::chrono::milliseconds ttl, Clock::time_point leaseEnds,
                     bool reader = false) {
    const auto it = std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.token == token; });
    if (it != waiters_.end()) {
      it->leaseEnds = leaseEnds;
      return static_cast<std::uint32_t>(it - waiters_.begin()) + 1;
    }
    waiters_.push_back(Waiter{std::string(token), ttl, leaseEnds, reader});
    return static_cast<std::uint32_t>(waiters_.size());
  }

  void leave(std::string_view token) {
    waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) { return w.token == token; }),
                   waiters_.end());
  }

  // The first waiter whose waiter lease lasts past `now`, taken out of the queue (the dead ones
  // before it too); nullopt when none.
  std::optional<Waiter> takeLive(Clock::time_point now) {
    while (!waiters_.empty()) {
      Waiter head = std::move(waiters_.front());
      waiters_.pop_front();
      if (head.leaseEnds > now) return head;
    }
    return std::nullopt;
  }

  // Grant watches: a watched token's hand-off is kept until its watch hears it.
  void watch(std::string_view token) { grants_[std::string(token)].reset(); }
  void unwatch(std::string_view token) {
    const auto it = grants_.find(token);
    if (it != grants_.end()) grants_.erase(it);
    heard_.erase(std::string(token));
  }
  // `heard` is called (the state's mutex held) as a hand-off to `token` is kept for its watch.
  void notify(std::string_view token, std::function<void()> heard) { heard_[std::string(token)] = std::move(heard); }
  void tell(const std::string& token, const Grant& grant) {
    const auto it = grants_.find(token);
    if (it != grants_.end()) it->second = grant;
    if (const auto told = heard_.find(token); told != heard_.end()) told->second();
  }
  // Drops a hand-off `token` has not heard yet: an attempt that found `token` waiting answers
  // after it, so the hand-off no longer stands (its claim ended; someone else holds the key).
  void forgetGrant(std::string_view token) {
    const auto it = grants_.find(token);
    if (it != grants_.end()) it->second.reset();
  }
  // The hand-off `token` has not heard yet, consumed.
  std::optional<Grant> takeGrant(std::string_view token) {
    const auto it = grants_.find(token);
    if (it == grants_.end() || !it->second) return std::nullopt;
    std::optional<Grant> grant = it->second;
    it->second.reset();
    return grant;
  }

 private:
  std::deque<Waiter> waiters_;
  std::map<std::string, std::optional<Grant>, std::less<>> grants_;
  std::map<std::string, std::function<void()>, std::less<>> heard_;  // notifyOnGrant's, by token
};

}  // namespace dlock::detail
