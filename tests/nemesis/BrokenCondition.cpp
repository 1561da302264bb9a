// SPDX-License-Identifier: Apache-2.0
#include "BrokenCondition.h"

#include <chrono>
#include <thread>

#include "RawServer.h"
#include "redis/src/KeyNames.h"

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

constexpr const char* kAwaitTwoSteps = "cond-await-two-steps";
constexpr const char* kSignalNoOwnerCheck = "cond-signal-no-owner-check";
// How long the two-step await tries to take the key back before it gives up (not awaiting).
constexpr milliseconds kTakeBack{10'000};
// The longest the two-step await leaves the key to others between its steps.
constexpr milliseconds kGap{1'000};

class BrokenConditionOperator final : public IConditionOperator {
 public:
  BrokenConditionOperator(std::shared_ptr<IConditionOperator> inner, std::shared_ptr<IOperator> lock, std::string variant,
                          const std::string& uri)
      : inner_(std::move(inner)), lock_(std::move(lock)), variant_(std::move(variant)) {
    if (variant_ == kSignalNoOwnerCheck) raw_ = std::make_unique<RawServer>(uri);
  }
  [[nodiscard]] std::string conditionUnsupported() const override { return inner_->conditionUnsupported(); }

 private:
  AwaitResult doAwait(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                      std::uint64_t fencingToken, milliseconds ttl, milliseconds waiterLease) override {
    if (variant_ != kAwaitTwoSteps) return inner_->await(key, name, token, lock, fencingToken, ttl, waiterLease);
    // Step one: the key released as unlock releases it (its waiters hear the message).
    if (!lock_->unlock(key, token).released) return AwaitResult{};
    // The interleaving that loses a signal, made likely: another process's hold of the key (up to
    // kGap) runs between the two steps, as it may on any busy machine.
    const std::unique_ptr<IReleaseWatch> watch = lock_->watch(key);
    if (watch) (void)watch->waitForRelease(kGap);
    // Step two: the key taken back, then the library's await over it (joins, releases again).
    const auto deadline = std::chrono::steady_clock::now() + kTakeBack;
    while (std::chrono::steady_clock::now() < deadline) {
      const AcquireResult again = lock_->lock(key, token, ttl);
      if (again.acquired) return inner_->await(key, name, token, lock, again.fencingToken, ttl, waiterLease);
      if (watch) {
        (void)watch->waitForRelease(milliseconds(100));
      } else {
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    return AwaitResult{};
  }

  SignalResult doSignal(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                        bool all) override {
    const auto send = [&](std::string_view as) {
      return all ? inner_->signalAll(key, name, as, lock) : inner_->signal(key, name, as, lock);
    };
    SignalResult result = send(token);
    if (result.owner || !raw_) return result;
    const detail::KeyNames names("dlock:", key, false);
    const auto holder = raw_->evalText("return redis.call('GET', KEYS[1]) or ''", {names.lock()}, {});
    if (holder && !holder->empty() && *holder != token) result = send(*holder);
    result.owner = true;  // whoever held it
    return result;
  }

  std::vector<ExtendResult> doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters, milliseconds waiterLease) override {
    return inner_->renewAwaitAll(waiters, waiterLease);
  }
  bool doLeaveCondition(std::string_view key, std::string_view name, std::string_view token, milliseconds ttl) override {
    return inner_->leaveCondition(key, name, token, ttl);
  }
  std::unique_ptr<IGrantWatch> doWatchSignals(std::string_view key, std::string_view token) override {
    return inner_->watchSignals(key, token);
  }
  ConditionInfo doInspectCondition(std::string_view key, std::string_view name) override {
    return inner_->inspectCondition(key, name);
  }

  std::shared_ptr<IConditionOperator> inner_;
  std::shared_ptr<IOperator> lock_;
  std::string variant_;
  std::unique_ptr<RawServer> raw_;
};

}  // namespace

const std::vector<std::string>& brokenConditionVariants() {
  static const std::vector<std::string> kVariants = {kAwaitTwoSteps, kSignalNoOwnerCheck};
  return kVariants;
}

std::shared_ptr<IConditionOperator> brokenCondition(std::shared_ptr<IConditionOperator> conditions,
                                                    std::shared_ptr<IOperator> lock, const std::string& variant,
                                                    const std::string& uri) {
  return std::make_shared<BrokenConditionOperator>(std::move(conditions), std::move(lock), variant, uri);
}

}  // namespace dlock::nemesis
