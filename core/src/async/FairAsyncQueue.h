// SPDX-License-Identifier: Apache-2.0
// FairAsyncQueue.h — the fair lock's AsyncQueue: an async waiter holds its own place in the key's
// queue, as a sync waiter does (FairAttempt.h), so the order is one across processes, threads and
// async operations. A hand-off counts only once take() finds the key the token's on the server.
// Owner: one DistributedLock's AsyncAcquirer. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "AsyncQueue.h"
#include "HeldLease.h"
#include "LockCore.h"

namespace dlock::detail {

class FairAsyncQueue final : public AsyncQueue {
 public:
  explicit FairAsyncQueue(std::shared_ptr<LockCore> core) : core_(std::move(core)) {}

  FairAcquireResult join(const std::string& key, const std::string& token, Lifetime leaseTime) override {
    return core_->joinFairQueue(key, token, leaseTime);
  }
  Lease claim(const std::string& key, const std::string& token, const Grant& grant, Lifetime leaseTime) override {
    std::shared_ptr<LeaseState> lease = core_->claimGrant(key, token, grant.fencingToken, leaseTime);
    if (!lease) return Lease();
    return Lease(std::make_unique<HeldLease>(core_, std::move(lease)));
  }
  std::unique_ptr<IGrantWatch> watch(const std::string& key, const std::string& token) override {
    return core_->capabilities().fair->queue().watchGrants(key, token);
  }
  Lease take(const std::string& key, const std::string& token, Lifetime leaseTime, const CancelToken& cancel) override {
    std::shared_ptr<LeaseState> lease = core_->takeAs(key, leaseTime, cancel, token);
    if (!lease) return Lease();
    return Lease(std::make_unique<HeldLease>(core_, std::move(lease)));
  }
  void leave(const std::string& key, const std::string& token, Lifetime leaseTime) noexcept override {
    core_->leaveFairQueue(key, token, leaseTime, CallBudget::Clock::now() + kAsyncLeaveBudget);
  }
  [[nodiscard]] std::chrono::milliseconds renewal() const noexcept override {
    return core_->options().waiterLease / 3;  // as a sync waiter renews (FairAttempt::placeRenewal)
  }

 private:
  const std::shared_ptr<LockCore> core_;
};

}  // namespace dlock::detail
