// SPDX-License-Identifier: Apache-2.0
// ConditionDoubles.h — a memory backend with conditions to bend (spdlog's test_sink: a real backend
// under the double): every call goes to a MemoryOperator; a test overrides the ones it breaks.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "Fixtures.h"
#include "dlock/IConditionOperator.h"

namespace dlock::test {

class ForwardingConditions : public ForwardingOperator, public IConditionOperator {
 public:
  using ForwardingOperator::ForwardingOperator;

  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }

 protected:
  AwaitResult doAwait(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                      std::uint64_t fencingToken, std::chrono::milliseconds ttl,
                      std::chrono::milliseconds waiterLease) override {
    return inner_->await(key, name, token, lock, fencingToken, ttl, waiterLease);
  }
  SignalResult doSignal(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                        bool all) override {
    return all ? inner_->signalAll(key, name, token, lock) : inner_->signal(key, name, token, lock);
  }
  std::vector<ExtendResult> doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                            std::chrono::milliseconds waiterLease) override {
    return inner_->renewAwaitAll(waiters, waiterLease);
  }
  bool doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                        std::chrono::milliseconds ttl) override {
    return inner_->leaveCondition(key, name, token, ttl);
  }
  std::unique_ptr<IGrantWatch> doWatchSignals(std::string_view key, std::string_view token) override {
    return inner_->watchSignals(key, token);
  }
  ConditionInfo doInspectCondition(std::string_view key, std::string_view name) override {
    return inner_->inspectCondition(key, name);
  }
};

}  // namespace dlock::test
