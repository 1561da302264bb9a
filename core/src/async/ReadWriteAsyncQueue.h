// SPDX-License-Identifier: Apache-2.0
// ReadWriteAsyncQueue.h — a read-write lock side's AsyncQueue: an async reader or writer holds its
// own place in the name's one queue, as a sync one does (ReadWriteAttempt.h), so writer preference
// and the order hold across sync and async waiters. A hand-off counts only once the server
// confirms this mode's hold (ReadWriteCore::claimGrant).
// Owner: one ReadWriteSide's AsyncAcquirer. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "AsyncQueue.h"
#include "HeldLease.h"
#include "ReadWriteCore.h"

namespace dlock::detail {

class ReadWriteAsyncQueue final : public AsyncQueue {
 public:
  ReadWriteAsyncQueue(std::shared_ptr<ReadWriteCore> core, ReadWriteMode mode) : core_(std::move(core)), mode_(mode) {}

  FairAcquireResult join(const std::string& key, const std::string& token, Lifetime leaseTime) override {
    return core_->joinQueue(mode_, key, token, leaseTime);
  }
  std::unique_ptr<IGrantWatch> watch(const std::string& key, const std::string& token) override {
    return core_->watchGrants(mode_, key, token);
  }
  Lease claim(const std::string& key, const std::string& token, const Grant& grant, Lifetime leaseTime) override {
    return leaseOf(core_->claimGrant(mode_, key, token, grant.fencingToken, leaseTime));
  }
  Lease take(const std::string& key, const std::string& token, Lifetime leaseTime, const CancelToken& cancel) override {
    return leaseOf(core_->takeAs(mode_, key, leaseTime, cancel, token));
  }
  void leave(const std::string& key, const std::string& token, Lifetime leaseTime) noexcept override {
    core_->leaveQueue(mode_, key, token, leaseTime, CallBudget::Clock::now() + kAsyncLeaveBudget);
  }
  [[nodiscard]] std::chrono::milliseconds renewal() const noexcept override {
    return core_->options().waiterLease / 3;  // as a sync waiter renews (FairAttempt::placeRenewal)
  }

 private:
  Lease leaseOf(std::shared_ptr<LeaseState> lease) const {
    if (!lease) return Lease();
    return Lease(std::make_unique<CoreLease<ReadWriteCore>>(core_, std::move(lease)));
  }

  const std::shared_ptr<ReadWriteCore> core_;
  const ReadWriteMode mode_;
};

}  // namespace dlock::detail
