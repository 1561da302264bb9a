// SPDX-License-Identifier: Apache-2.0
// PermitAttempt.h — a semaphore's attempt for `count` permits, driven by the wait loop (WaitLoop.h)
// as the fair lock's is: each waiting thread holds its own place in the semaphore's one queue
// (ISemaphoreOperator.h), renews it every third of the waiter lease by trying again (the same
// idempotent try finds a grant whose message was lost: "ours already"), and listens for its grant
// on this process's grant channel.
//
// A grant counts only on the server's word at that moment (DESIGN.md, "Grants and messages"): the
// grantee extends its claim to its lease, and only an extend that finds the permits still this
// token's makes it a holder; a message older than the last try that found us waiting is dropped
// unread. A try cut off (its outcome unknown) is retried with the same token, which the backend
// answers with the same grant, so a grant whose reply was lost is settled by token; a wait that
// ends (its timeout, an error) leaves the queue, which also releases permits granted meanwhile.
// Owner: one acquire call. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "Attempt.h"
#include "PermitBackend.h"
#include "dlock/IFairOperator.h"

namespace dlock::detail {

class PermitAttempt final : public Attempt {
 public:
  // `waiterLease`: how long a place lasts unrenewed; zero for a single try (never queued).
  PermitAttempt(const AttemptTools& tools, PermitBackend& permits, std::uint32_t count,
                std::chrono::milliseconds waiterLease);

  [[nodiscard]] std::chrono::milliseconds placeRenewal() const noexcept override { return waiterLease_ / 3; }

  TryResult tryAcquire(const WaitState& state) override;
  bool join(const WaitState& state) override;
  std::optional<Held> await(const WaitState& state, const Pause& pause) override;
  void leave(const WaitState& state) noexcept override;

  [[nodiscard]] std::string takeToken() noexcept override { return std::move(token_); }
  [[nodiscard]] const char* kind() const noexcept override { return "permits, "; }

 private:
  // The grant's claim extended to the lease: the server's answer (still this token's?), or
  // nullopt when none came. Sent at `sentAt`.
  std::optional<bool> extendClaim(Clock::time_point& sentAt);
  // Held on a claim of `validity` from `sentAt`, extended to the whole lease first when shorter.
  TryResult claimed(std::uint64_t fencingToken, Clock::time_point sentAt, std::chrono::milliseconds validity,
                    const WaitState& state);

  const AttemptTools tools_;
  PermitBackend& permits_;
  const std::uint32_t count_;
  const std::chrono::milliseconds waiterLease_;
  std::string token_;
  std::unique_ptr<IGrantWatch> grants_;
  bool askAgain_ = false;  // the last try found a claim that ended before its extend
};

}  // namespace dlock::detail
