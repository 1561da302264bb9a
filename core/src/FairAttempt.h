// SPDX-License-Identifier: Apache-2.0
// FairAttempt.h — the fair lock's attempt. Each waiting thread holds its own place in the
// backend's queue (threads of one process queue there too, so the order is one across processes
// and threads), listens for its own hand-off, and renews its place every third of the waiter lease
// by trying again: the same idempotent try finds a hand-off whose message was lost, and a waiter
// that died stops renewing and is skipped once its lease ends (handed the key just before, it
// holds it for a claim lease no longer than its place had left).
//
// A hand-off counts only on the server's word at that moment (DESIGN.md, "Grants and messages"):
// the heir extends its claim to its ttl, and only an extend that finds the key still this token's
// makes it the holder. A waiter paused past its claim, whose key someone else took meanwhile, is
// told "not ours" and asks again, queueing anew. A message never outlives the try it answered:
// one older than the last try that found us waiting is dropped unread. A waiter that gives up
// (its timeout, an error) leaves the queue; a hand-off that raced it is passed on by that leave.
// Owner: one acquire call. Thread safety: not thread-safe.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "Attempt.h"
#include "FairBackend.h"
#include "LeaseState.h"
#include "dlock/IFairOperator.h"

namespace dlock::detail {

class FairAttempt final : public Attempt {
 public:
  // `waiterLease`: how long a place lasts unrenewed; zero for a single try (never queued).
  // `token`: a place this token holds already (a signalled Condition waiter's); empty: a new one.
  FairAttempt(const AttemptTools& tools, FairBackend& fair, std::chrono::milliseconds waiterLease,
              std::string token = {});

  [[nodiscard]] std::chrono::milliseconds placeRenewal() const noexcept override { return waiterLease_ / 3; }

  TryResult tryAcquire(const WaitState& state) override;
  bool join(const WaitState& state) override;
  std::optional<Held> await(const WaitState& state, const Pause& pause) override;
  void leave(const WaitState& state) noexcept override;

  [[nodiscard]] std::string takeToken() noexcept override { return std::move(token_); }
  [[nodiscard]] const char* kind() const noexcept override { return "fair, "; }

 private:
  // The claim of a hand-off extended to the ttl: the server's answer (is the key this token's
  // now?), or nullopt when none came. Sent at `sentAt`.
  std::optional<bool> extendClaim(Clock::time_point& sentAt);

  const AttemptTools tools_;
  FairBackend& fair_;
  const std::chrono::milliseconds waiterLease_;
  std::string token_;
  std::unique_ptr<IGrantWatch> grants_;
  bool listenFirst_;       // subscribe before the first try
  bool askAgain_ = false;  // the last try found a claim that ended before its extend
};

// Leaves the queue of `tools.key` for `token` for good (IFairOperator::leaveQueue): within
// `deadline`, else on the lock's cleanup lane. FairAttempt::leave's, and an async waiter's.
void leaveFairQueue(const AttemptTools& tools, FairBackend& fair, const std::string& token,
                    std::chrono::milliseconds waiterLease, CallBudget::TimePoint deadline) noexcept;

}  // namespace dlock::detail
