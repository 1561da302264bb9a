// SPDX-License-Identifier: Apache-2.0
// ConditionAttempt.h — a Condition's wait for its signal as the wait loop (WaitLoop.h) drives it.
// It ends "Held" once the waiter is signalled, holding nothing yet: the Condition then takes the
// key again through the lock's own attempt (LockCore::reacquire).
//
//   first try   watch (taken before, so no signal goes unheard), then the await script: joins
//               the condition and releases the key in one step (the hold is given up then:
//               `Joined::onJoined`); refused → LockLostError, nothing joined
//   later try   the waiter's place, which the lock's place watchdog renews in one batch for all
//               its waiters (ConditionRenewer): ended (not on the condition any more) → signalled.
//               That renewal is the recheck that finds a signal whose message was lost
//   pause       the signal watch (exclusive key: watchSignals; fair key: the hand-off on its grant
//               watch, as a signalled fair waiter is moved into the key's queue): a message → signalled
//   leave       out of the condition (leaveCondition, which also leaves a fair key's queue once
//               signalled): a timeout, a cancel, an error after the await script may have run;
//               it notes whether the waiter had been signalled already (Joined)
//
// Owner: one Condition wait. Thread safety: not thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "Attempt.h"
#include "FairBackend.h"
#include "LeaseState.h"
#include "dlock/IConditionOperator.h"

namespace dlock::detail {

class ConditionAttempt final : public Attempt {
 public:
  // What the wait shares with its Condition: whether the await script may have run, and when it
  // answered that the waiter joined (the hold given up at that moment).
  struct Joined {
    bool sent = false;    // an await was sent (its answer may have been lost)
    bool joined = false;  // an await answered "awaiting"
    std::function<void()> onJoined;
    // Set by leave() once the server answered: the waiter was signalled before it left (a cancel
    // that came after a signal: the signal is not to be lost). Shared: a leave that failed within
    // the wait's budget is tried again on the cleanup lane.
    std::shared_ptr<std::atomic<bool>> signalledBeforeLeave = std::make_shared<std::atomic<bool>>(false);
  };

  struct Parts {
    IConditionOperator& conditions;
    ConditionLock lock;
    FairBackend* fair;  // the fair lock's queue (a signalled waiter's hand-off); null for the exclusive lock
    std::string_view name;
    const LeaseState& given;  // the hold given up: its token, fencing token and ttl
    std::chrono::milliseconds waiterLease;
    Joined& joined;
    std::function<void(std::shared_ptr<LeaseState>)> keepPlace;  // LockCore::keepPlace
  };

  ConditionAttempt(const AttemptTools& tools, Parts parts) : tools_(tools), parts_(std::move(parts)) {}
  ConditionAttempt(const ConditionAttempt&) = delete;
  ConditionAttempt& operator=(const ConditionAttempt&) = delete;
  // The place is no longer renewed once the wait is over.
  ~ConditionAttempt() override {
    if (place_) place_->abandon();
  }

  [[nodiscard]] std::chrono::milliseconds placeRenewal() const noexcept override { return parts_.waiterLease / 3; }

  TryResult tryAcquire(const WaitState& state) override;
  bool join(const WaitState& /*state*/) override { return false; }  // the watch came before the await
  std::optional<Held> await(const WaitState& state, const Pause& pause) override;
  void leave(const WaitState& state) noexcept override;

  [[nodiscard]] std::string takeToken() noexcept override { return parts_.given.token; }
  [[nodiscard]] const char* kind() const noexcept override { return "condition, "; }

 private:
  TryResult joinCondition();

  const AttemptTools tools_;
  const Parts parts_;
  std::shared_ptr<LeaseState> place_;  // once joined: renewed by the lock's place watchdog
  std::unique_ptr<IGrantWatch> signals_;
  bool signalled_ = false;  // a message said so
  bool refused_ = false;    // the await was refused: nothing joined, nothing to leave
};

}  // namespace dlock::detail
