// SPDX-License-Identifier: Apache-2.0
// The holder over IOperator and IConditionOperator (ConditionHold.h): an attempt loop for the
// key, a renewer for the hold, and the waiter's own loop inside await.
#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>

#include <dlock/LockError.h>

#include "ConditionHold.h"
#include "HoldRenewal.h"

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;
using Sink = std::function<void(Op)>;



struct Taken {
  AcquireResult result;
  std::int64_t sentNs = 0;
  std::int64_t replyNs = 0;
};

// Attempts until the key is taken for `token` or `deadline` passes (nothing then); a release
// message or the holder's lease end wakes the next attempt. A ConnectionError with time left is
// tried again after a short pause; the last one is thrown.
std::optional<Taken> take(IOperator& lock, const std::string& key, const std::string& token, milliseconds ttl,
                          Clock::time_point deadline) {
  const std::unique_ptr<IReleaseWatch> watch = lock.watch(key);
  while (true) {
    const std::int64_t sent = monotonicNs();
    AcquireResult result;
    try {
      result = lock.lock(key, token, ttl);
    } catch (const ConnectionError&) {
      if (Clock::now() >= deadline) throw;
      std::this_thread::sleep_for(milliseconds(50));
      continue;
    }
    if (result.acquired) return Taken{result, sent, monotonicNs()};
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::nullopt;
    const milliseconds wait = std::min(left, result.holderTtl.count() > 0 ? result.holderTtl + milliseconds(1) : milliseconds(100));
    if (watch) {
      (void)watch->waitForRelease(wait);
    } else {
      std::this_thread::sleep_for(std::min(wait, milliseconds(20)));
    }
  }
}

class CondHold final : public ICondHold {
 public:
  CondHold(std::shared_ptr<IOperator> lock, std::shared_ptr<IConditionOperator> conditions, Sink sink, std::string key,
           std::string token, milliseconds lease, bool renewed, milliseconds waiterLease, const Taken& taken)
      : lock_(std::move(lock)), conditions_(std::move(conditions)), sink_(std::move(sink)), key_(std::move(key)),
        token_(std::move(token)), lease_(lease), renewed_(renewed), waiterLease_(waiterLease) {
    adopt(taken);
  }
  ~CondHold() override {
    stopRenewing();
    if (released_ || !held_) return;
    try {
      (void)lock_->unlock(key_, token_);
    } catch (...) {  // its lease ends on its own
    }
  }

  [[nodiscard]] std::uint64_t fencingToken() const override { return fence_; }
  [[nodiscard]] const std::string& ownerToken() const override { return token_; }
  [[nodiscard]] bool isHeld() const override { return held_ && !lost_ && monotonicNs() < deadlineNs_.load(); }

  bool await(const std::string& name, milliseconds timeout, milliseconds reacquire) override {
    stopRenewing();
    held_ = false;  // from this call on, whatever the server answers
    const std::unique_ptr<IGrantWatch> watch = conditions_->watchSignals(key_, token_);
    const std::int64_t sent = monotonicNs();
    const AwaitResult joined =
        conditions_->await(key_, name, token_, ConditionLock::Exclusive, fence_, lease_, waiterLease_);
    if (!joined.awaiting) {
      lost_ = true;
      throw LockLostError("dlock: await '" + key_ + "': the key was not held; nothing joined");
    }
    recordHoldOp(sink_, "joined", key_, token_, name);
    const char* why = waitOnCondition(*watch, name, timeout, sent);
    // Recorded before the place is left: a signal answered before this record ran before the leave.
    recordHoldOp(sink_, "woken", key_, token_, name + " " + why);
    if (std::string(why) == "timeout") {
      try {
        (void)conditions_->leaveCondition(key_, name, token_, lease_);
      } catch (const LockError&) {  // its place ends with its lease
      }
    }
    const auto taken = take(*lock_, key_, token_, lease_, Clock::now() + reacquire);
    if (!taken) throw LockLostError("dlock: await '" + key_ + "': the key was not re-acquired in time");
    adopt(*taken);
    return true;
  }

  std::uint32_t signalAll(const std::string& name) override {
    const SignalResult result = conditions_->signalAll(key_, name, token_, ConditionLock::Exclusive);
    if (!result.owner) throw NotOwnerError("dlock: signalAll '" + key_ + "': not the owner");
    return result.moved;
  }

  void release() override {
    stopRenewing();
    held_ = false;
    const ReleaseResult result = lock_->unlock(key_, token_);
    released_ = true;
    if (!result.released) throw LockLostError("dlock: release '" + key_ + "': not ours (the lease had ended or was taken)");
  }

 private:
  // Until signalled (a message, or a renewal that finds the place gone), the timeout (the caller
  // leaves the place) or the place's local deadline passing unrenewed. Renews every third of the
  // waiter lease.
  const char* waitOnCondition(IGrantWatch& watch, const std::string& name, milliseconds timeout, std::int64_t sentNs) {
    const auto deadline = Clock::now() + timeout;
    std::int64_t placeUntilNs = sentNs + waiterLease_.count() * 1'000'000;
    const ConditionWaiter waiter{key_, name, token_, lease_};
    while (true) {
      if (Clock::now() >= deadline) return "timeout";
      if (monotonicNs() >= placeUntilNs) return "lapsed";
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()) + milliseconds(1);
      if (watch.waitForGrant(std::min(waiterLease_ / 3, left)).kind == Grant::Kind::Granted) return "signalled";
      if (monotonicNs() >= placeUntilNs) return "lapsed";
      const std::int64_t sent = monotonicNs();
      try {
        const ExtendResult renewed = conditions_->renewAwaitAll({waiter}, waiterLease_).front();
        if (renewed.extended) {
          placeUntilNs = sent + waiterLease_.count() * 1'000'000;
        } else if (!renewed.unknown) {
          return "signalled";
        }
      } catch (const LockError&) {  // unknown: the place's local deadline decides
      }
    }
  }

  void adopt(const Taken& taken) {
    fence_ = taken.result.fencingToken;
    const milliseconds valid = taken.result.validity.count() > 0 ? taken.result.validity : lease_;
    deadlineNs_ = taken.sentNs + valid.count() * 1'000'000;
    recordHoldOp(sink_, "lease", key_, token_, std::to_string(valid.count()), taken.sentNs);
    recordHoldOp(sink_, "taken", key_, token_, std::to_string(taken.replyNs), taken.sentNs);
    lost_ = false;
    held_ = true;
    if (renewed_) {
      renewal_.start({[this] { return lock_->extendAll({LeaseRef{key_, token_}}, lease_).front(); }, sink_, key_, token_,
                      fence_, lease_, &deadlineNs_, &lost_});
    }
  }

  void stopRenewing() { renewal_.stop(); }

  std::shared_ptr<IOperator> lock_;
  std::shared_ptr<IConditionOperator> conditions_;
  Sink sink_;
  std::string key_;
  std::string token_;
  milliseconds lease_;
  bool renewed_;
  milliseconds waiterLease_;
  std::atomic<std::uint64_t> fence_{0};
  std::atomic<std::int64_t> deadlineNs_{0};
  std::atomic<bool> lost_{false};
  std::atomic<bool> held_{false};
  bool released_ = false;
  HoldRenewal renewal_;
};

class CondHolder final : public ICondHolder {
 public:
  CondHolder(std::shared_ptr<IOperator> lock, std::shared_ptr<IConditionOperator> conditions, Sink sink,
             milliseconds lease, milliseconds waiterLease)
      : lock_(std::move(lock)), conditions_(std::move(conditions)), sink_(std::move(sink)), lease_(lease),
        waiterLease_(waiterLease) {}

  std::unique_ptr<ICondHold> acquire(const std::string& key, milliseconds timeout, milliseconds fixedLease) override {
    std::string token = newOwnerToken();
    const milliseconds lease = fixedLease.count() > 0 ? fixedLease : lease_;
    const auto taken = take(*lock_, key, token, lease, Clock::now() + timeout);
    if (!taken) return nullptr;
    return std::make_unique<CondHold>(lock_, conditions_, sink_, key, std::move(token), lease, fixedLease.count() == 0,
                                      waiterLease_, *taken);
  }

 private:
  std::shared_ptr<IOperator> lock_;
  std::shared_ptr<IConditionOperator> conditions_;
  Sink sink_;
  milliseconds lease_;
  milliseconds waiterLease_;
};

}  // namespace

std::shared_ptr<ICondHolder> makeConditionHolder(std::shared_ptr<IOperator> lock,
                                                 std::shared_ptr<IConditionOperator> conditions,
                                                 std::function<void(Op)> sink, milliseconds lease,
                                                 milliseconds waiterLease) {
  if (!conditions) throw ConfigError("dlock: this backend has no conditions");
  return std::make_shared<CondHolder>(std::move(lock), std::move(conditions), std::move(sink), lease, waiterLease);
}

}  // namespace dlock::nemesis
