// SPDX-License-Identifier: Apache-2.0
// DefaultAttempt.h — the default lock's attempt: one SET-if-free per try, with a new token after a
// try that was cut off (cancelled at once, as it may have landed or land yet). Waiting threads of
// one process queue in the lock's WaiterQueue, so only the head polls the backend; between tries
// the user's IWait strategy waits, on a release watch when it wants one. While a watch listens, a
// try that finds the key taken registers this waiter with the backend, so a release wakes one
// registered waiter, not every one (no herd: one try per hand-off, not one per waiting process);
// the waiter tries again at least every kRecheck, which renews its registration and finds a key
// whose wake-up was lost (a lost wake-up costs at most that, its IWait's own recheck (NotifyWait:
// 1 s) or the holder's lease, whichever is shortest).
// The lock stays unfair: a newcomer may take the key before the woken waiter, which then keeps its
// place and is woken first at the next release. A key waited for lately is listened for before
// the first try (the subscription is most likely still there), so that try registers and needs no
// second one. An acquisition right after a contended release of
// ours holds back first (ContendedReleases).
// Owner: one acquire call. Thread safety: not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "Attempt.h"
#include "ContendedReleases.h"
#include "WaiterQueue.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/IWait.h"

namespace dlock::detail {

class DefaultAttempt final : public Attempt {
 public:
  // The default lock's own parts, beside AttemptTools.
  // While it listens for wake-ups, a waiter tries at least this often: each try renews its
  // registration, which a backend keeps longer (Redis: 30 s after the try). Its IWait may recheck
  // sooner (NotifyWait: every second by default); tests that wait for wake-ups make that long.
  static constexpr std::chrono::milliseconds kRecheck{10000};

  struct Parts {
    IWait& wait;
    const ForkLocal<WaiterQueue>& waiters;  // reached only when the key is taken
    ContendedReleases& contended;
    IOwnerRecorder* recorder;                   // when an owner label is recorded; else null
    const std::optional<std::string>& ownerLabel;  // LockOptions::ownerLabel
    bool once;                                      // a single try (WaitPolicy::once): never listens
  };

  DefaultAttempt(const AttemptTools& tools, const Parts& parts);

  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> holdBackUntil() override {
    return parts_.contended.take(tools_.key);
  }
  [[nodiscard]] WaiterQueue* processQueue() noexcept override { return &*parts_.waiters; }
  [[nodiscard]] std::chrono::milliseconds placeRenewal() const noexcept override {
    return releases_ ? kRecheck : std::chrono::milliseconds::max();
  }

  TryResult tryAcquire(const WaitState& state) override;
  bool join(const WaitState& state) override;
  std::optional<Held> await(const WaitState& state, const Pause& pause) override;
  // A cut-off try was cancelled at once (or is now, when a cancel cut it off); a key taken by a
  // try that raced a cancel is cancelled now.
  void leave(const WaitState& state) noexcept override {
    if (state.leftOnServer && (!cutOff_ || cancelOnLeave_)) cancelCutOff();
    cancelOnLeave_ = false;
  }

  [[nodiscard]] std::string takeToken() noexcept override { return std::move(token_); }
  [[nodiscard]] const char* kind() const noexcept override { return ""; }

 private:
  AcquireResult send();
  void cancelCutOff();

  const AttemptTools tools_;
  const Parts parts_;
  std::string token_;
  bool cutOff_ = false;  // the last try was cut off: its token is cancelled, the next try needs another
  bool cancelOnLeave_ = false;  // ... by a cancel: its token is cancelled by leave()
  bool listenFirst_;     // listen before the first try (a key waited for lately)
  std::unique_ptr<IReleaseWatch> releases_;
};

}  // namespace dlock::detail
