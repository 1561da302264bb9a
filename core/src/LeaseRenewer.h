// SPDX-License-Identifier: Apache-2.0
// LeaseRenewer.h — how the watchdog (Watchdog.h) renews the leases of one kind of hold: one call
// per batch, so renewal traffic does not grow with the number of held keys. The exclusive and fair
// locks renew through IOperator::extendAll (ExclusiveRenewer); a read-write lock or a semaphore
// gives its watchdog a renewer over its own backend surface.
// Owner: the watchdog (shared). Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "LeaseState.h"
#include "dlock/IConditionOperator.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

class LeaseRenewer {
 public:
  LeaseRenewer() = default;
  LeaseRenewer(const LeaseRenewer&) = delete;
  LeaseRenewer& operator=(const LeaseRenewer&) = delete;
  virtual ~LeaseRenewer() = default;

  // One result per lease, in order, as IOperator::extendAll (`unknown` when the backend could not
  // be reached; a call that throws settles none).
  virtual std::vector<ExtendResult> renewAll(const std::vector<std::shared_ptr<LeaseState>>& batch,
                                             std::chrono::milliseconds ttl) = 0;
  // For logs: the backend renewed on.
  [[nodiscard]] virtual std::string describe() const = 0;
};

// A Condition's waiters' places (LeaseKind::Awaiting): IConditionOperator::renewAwaitAll, whose
// "not extended" means signalled (or dropped), not lost. `ttl` is the waiter lease.
class ConditionRenewer final : public LeaseRenewer {
 public:
  // `backend`: the lock's, for logs.
  ConditionRenewer(std::shared_ptr<IConditionOperator> conditions, std::shared_ptr<IOperator> backend)
      : conditions_(std::move(conditions)), backend_(std::move(backend)) {}

  std::vector<ExtendResult> renewAll(const std::vector<std::shared_ptr<LeaseState>>& batch,
                                     std::chrono::milliseconds ttl) override {
    std::vector<ConditionWaiter> waiters;
    waiters.reserve(batch.size());
    for (const auto& place : batch) {
      waiters.push_back(ConditionWaiter{place->key, place->condition, place->token, place->ttl});
    }
    return conditions_->renewAwaitAll(waiters, ttl);
  }
  [[nodiscard]] std::string describe() const override { return backend_->describe(); }

 private:
  const std::shared_ptr<IConditionOperator> conditions_;
  const std::shared_ptr<IOperator> backend_;
};

// The exclusive (and fair) lock's leases: key and token, through IOperator::extendAll.
class ExclusiveRenewer final : public LeaseRenewer {
 public:
  explicit ExclusiveRenewer(std::shared_ptr<IOperator> backend) : backend_(std::move(backend)) {}

  std::vector<ExtendResult> renewAll(const std::vector<std::shared_ptr<LeaseState>>& batch,
                                     std::chrono::milliseconds ttl) override {
    std::vector<LeaseRef> refs;
    refs.reserve(batch.size());
    for (const auto& lease : batch) refs.push_back(LeaseRef{lease->key, lease->token});
    return backend_->extendAll(refs, ttl);
  }
  [[nodiscard]] std::string describe() const override { return backend_->describe(); }

 private:
  const std::shared_ptr<IOperator> backend_;
};

}  // namespace dlock::detail
