// SPDX-License-Identifier: Apache-2.0
// FairReleaseToNewest.h — a deliberately BROKEN fair lock, test code only: before each fair
// release, the newest waiter of the key's queue is moved to its head (kNewestFirst, sent outside
// the library), so the release hands the key to the newest waiter instead of the oldest. The FIFO
// test (FairLockOnRedisTest.cpp) and the fault tests (`dlock_nemesis_client --broken fair-order`,
// BrokenOperator.h) must catch it. The move and the release are two calls, not one script: the
// broken order holds whenever nobody joins the queue between them, as in those tests.
// Owner: the lock built on it. Thread safety: as the wrapped operator, given a thread-safe
// `newestFirst`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "redis/src/KeyNames.h"  // backends/redis/src: the queue's name, as the Redis backend writes it
#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"

namespace dlock::test::broken {

// KEYS: a fair queue. Moves its newest waiter to its head.
inline constexpr const char* kNewestFirst = R"lua(
local newest = redis.call('LINDEX', KEYS[1], -1)
if newest then
  redis.call('LREM', KEYS[1], 1, newest)
  redis.call('LPUSH', KEYS[1], newest)
end
return 0
)lua";

// The fair queue of `key` with the default prefix, on one server.
inline std::string fairQueueKey(std::string_view key) { return detail::KeyNames("dlock:", key, false).fairQueue(); }

class FairReleaseToNewest final : public IOperator, public IFairOperator {
 public:
  // Sends kNewestFirst with the queue's name as its key, on a connection of its own.
  using NewestFirst = std::function<void(const std::string& queueKey)>;

  // `inner`: a backend with a fair queue (std::bad_cast otherwise).
  FairReleaseToNewest(std::shared_ptr<IOperator> inner, NewestFirst newestFirst)
      : inner_(std::move(inner)), fair_(dynamic_cast<IFairOperator&>(*inner_)), newestFirst_(std::move(newestFirst)) {}

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->lock(key, token, ttl);
  }
  ReleaseResult unlock(std::string_view key, std::string_view token) override { return inner_->unlock(key, token); }
  ReleaseResult cancel(std::string_view key, std::string_view token) override { return inner_->cancel(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->extend(key, token, ttl);
  }
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override {
    return inner_->extendAll(leases, ttl);
  }
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }
  [[nodiscard]] std::string describe() const override { return inner_->describe() + " (broken: fair-order)"; }

  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override {
    return fair_.fairLock(key, token, ttl, waiterLease);
  }
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override {
    newestFirst_(fairQueueKey(key));
    return fair_.fairUnlock(key, token);
  }
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return fair_.leaveQueue(key, token, ttl);
  }
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override {
    return fair_.watchGrants(key, token);
  }
  [[nodiscard]] std::string fairUnsupported() const override { return fair_.fairUnsupported(); }

 private:
  std::shared_ptr<IOperator> inner_;
  IFairOperator& fair_;
  NewestFirst newestFirst_;
};

}  // namespace dlock::test::broken
