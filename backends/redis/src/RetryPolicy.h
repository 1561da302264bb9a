// SPDX-License-Identifier: Apache-2.0
// RetryPolicy.h — whether, when and how long one call tries again: the only place that decides.
// After a try that failed, the topology says what changed (Next: where the next try would go);
// the policy decides from that, the way the try failed and the call's budget whether to try
// again at once, after a pause, or not at all. Pauses come from Backoff (Backoff.h); a topology
// that hears of changes (Sentinel) cuts a pause short, never makes it longer.
//
//   a pooled connection found dead while idle   replaced once: the command never ran
//   Redirected (MOVED, ASK)                     at once, up to kMaxRedirects per call
//   Moved (a failover, a new slot map)          at once, within the budget
//   Unchanged ("not now", no owner known yet)   after a pause, within the budget
//   Final                                       never
//
// Every script the library runs is idempotent for its token (a retried acquire finds its own
// token; a retried release reads its own record; renewals and fences only go up), so a try that
// may have run is retried as safely as one that did not.
// Owner: one call (Call), on the calling thread. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "dlock/detail/Backoff.h"

namespace dlock::detail {

// How a try ended without a reply.
enum class Failure {
  NoConnection,  // no connection could be had: the command was not sent
  Stale,         // a pooled connection had died while idle (not a timeout): not run on a live server
  Io,            // the connection failed or timed out after the command may have been sent
};

// What a topology learned from a failed try: where the next try would go.
enum class Next {
  Final,       // nowhere new: the error reply or the failure is the call's outcome
  Redirected,  // the server named where the key lives now
  Moved,       // the key's owner changed since the try (a failover, a new slot map)
  Unchanged,   // the same place, which said "not now" (LOADING, TRYAGAIN, a failover under way)
};

class RetryPolicy {
 public:
  enum class Step { GiveUp, Now, AfterPause };

  static constexpr unsigned kMaxRedirects = 16;

  // `budget`: how long after the first try a retry may still start; never past the deadline of the
  // wait the call runs inside (CallBudget.h), nor are its pauses.
  explicit RetryPolicy(std::chrono::milliseconds budget);

  // After an error reply the topology judged `next`. `asking`: the redirection is an ASK (a
  // subscription cannot follow one).
  Step afterReply(Next next, bool asking);
  // After a try without a reply that the topology judged `next`.
  Step afterFailure(Failure failure, Next next);
  // When the topology knows no node to send the call to.
  Step whenNowhere();

  // The pause before an AfterPause retry: the next back-off step, cut to end at the deadline.
  [[nodiscard]] std::chrono::milliseconds pause() const noexcept { return pause_; }

  // Why the last GiveUp gave up, for the call's error ("" when the reply or failure says it all).
  [[nodiscard]] const std::string& reason() const noexcept { return reason_; }
  [[nodiscard]] std::chrono::milliseconds budget() const noexcept { return budget_; }
  void setSubscribing() noexcept { subscribing_ = true; }

 private:
  Step withinBudget(Step step);

  const std::chrono::milliseconds budget_;
  const std::chrono::steady_clock::time_point deadline_;
  Backoff backoff_;
  std::chrono::milliseconds pause_{0};
  unsigned redirects_ = 0;
  bool staleReplaced_ = false;
  bool subscribing_ = false;
  std::string reason_;
};

// One call of the lock protocol across its tries: what it is, for messages, and its policy.
struct Call {
  Call(const char* what, std::string_view about, std::chrono::milliseconds budget)
      : operation(what), key(about), policy(budget) {}

  const char* operation;
  std::string_view key;
  RetryPolicy policy;
  std::string note;  // appended to the final error: why the topology could not recover
};

}  // namespace dlock::detail
