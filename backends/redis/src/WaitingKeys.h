// SPDX-License-Identifier: Apache-2.0
// WaitingKeys.h — the keys an operator's waiters listen on for a wake-up (one live release watch
// each), so that an acquire of such a key registers the operator's listener in the key's waiter
// registry when it finds the key taken (Scripts.h), and only then: a registration nobody listens
// for would take a release's one wake-up for nothing.
// Owner: one RedisOperator (a forked child gets its own: the parent's watches are not there); a
// watch keeps its Registration, and the WaitingKeys with it. Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace dlock::detail {

class WaitingKeys : public std::enable_shared_from_this<WaitingKeys> {
 public:
  // One watch listening on a key, from construction to destruction.
  class Registration {
   public:
    Registration(std::shared_ptr<WaitingKeys> keys, std::string key) : keys_(std::move(keys)), key_(std::move(key)) {}
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    ~Registration() { keys_->remove(key_); }

   private:
    const std::shared_ptr<WaitingKeys> keys_;
    const std::string key_;
  };

  [[nodiscard]] std::unique_ptr<Registration> add(std::string_view key) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      ++counts_[std::string(key)];
      total_.fetch_add(1, std::memory_order_relaxed);
    }
    return std::make_unique<Registration>(shared_from_this(), std::string(key));
  }

  // The watches listening on `key`; an acquire nobody waits beside reads one atomic.
  [[nodiscard]] std::uint32_t count(std::string_view key) const {
    if (total_.load(std::memory_order_relaxed) == 0) return 0;
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = counts_.find(key);
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  void remove(const std::string& key) noexcept {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = counts_.find(key);
    if (it == counts_.end()) return;
    if (--it->second == 0) counts_.erase(it);
    total_.fetch_sub(1, std::memory_order_relaxed);
  }

  mutable std::mutex mutex_;
  std::map<std::string, std::uint32_t, std::less<>> counts_;  // guarded by mutex_
  std::atomic<std::uint32_t> total_{0};                       // the sum of counts_
};

}  // namespace dlock::detail
