// SPDX-License-Identifier: Apache-2.0
// FairBackend.h — the backend of a fair lock: an IOperator over a backend's fair queue
// (IFairOperator), so LockCore's release paths, the watchdog and the Lease handles hand the key
// over without knowing it. lock() tries once without queueing; unlock() releases with hand-off;
// renewals and the rest go to the backend as they are. The fair lock's attempt (FairAttempt.h)
// reaches the queue through queue().
// Owner: one LockCore (shared with its watchdog). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "RecentContention.h"
#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"
#include "dlock/LockOptions.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

class FairBackend final : public IOperator {
 public:
  // The fair backend over `backend`; ConfigError, saying why, when it has no fair queue.
  static std::shared_ptr<FairBackend> wrap(const std::shared_ptr<IOperator>& backend, const LockOptions& options) {
    auto* queue = dynamic_cast<IFairOperator*>(backend.get());
    if (queue == nullptr) {
      throw ConfigError("dlock: LockBuilder: fair(true) needs one waiter queue per key on one server; " +
                        backend->describe() +
                        " has no single queue (Redlock spreads a key over independent servers, whose queues "
                        "would disagree on the order); use a single, Sentinel or Cluster backend");
    }
    const std::string unsupported = queue->fairUnsupported();
    if (!unsupported.empty()) throw ConfigError("dlock: LockBuilder: fair(true) on " + backend->describe() + ": " + unsupported);
    try {
      checkLeaseTime(options.waiterLease, "waiterLease", "LockBuilder");
    } catch (const InvalidArgumentError& error) {
      throw ConfigError(error.what());
    }
    if (options.waiterLease < std::chrono::milliseconds(3)) {
      throw ConfigError("dlock: LockBuilder: waiterLease must be at least 3 ms");
    }
    return std::make_shared<FairBackend>(backend, *queue);
  }

  FairBackend(std::shared_ptr<IOperator> backend, IFairOperator& queue)
      : backend_(std::move(backend)), queue_(queue), contended_([] { return std::make_shared<RecentContention>(); }) {}

  [[nodiscard]] IFairOperator& queue() const noexcept { return queue_; }
  // The keys this process waited for lately (RecentContention.h).
  [[nodiscard]] RecentContention& contended() const { return *contended_; }

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    const FairAcquireResult fair = queue_.fairLock(key, token, ttl, std::chrono::milliseconds(0));
    AcquireResult result;
    result.acquired = fair.acquired;
    result.fencingToken = fair.fencingToken;
    result.validity = fair.validity;
    result.holderTtl = fair.holderTtl;
    return result;
  }

  ReleaseResult unlock(std::string_view key, std::string_view token) override {
    ReleaseResult result = queue_.fairUnlock(key, token);
    // The key went to a waiter, not up for grabs: the lock has no reason to hold back from it.
    result.notified = 0;
    return result;
  }

  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return backend_->extend(key, token, ttl);
  }

  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override {
    return backend_->extendAll(leases, ttl);
  }

  [[nodiscard]] std::string describe() const override { return backend_->describe(); }

 private:
  const std::shared_ptr<IOperator> backend_;
  IFairOperator& queue_;  // backend_'s
  ForkLocal<RecentContention> contended_;
};

}  // namespace dlock::detail
