// SPDX-License-Identifier: Apache-2.0
// GrantClaim.h — the pause of a queued attempt (FairAttempt, PermitAttempt): a grant heard on the
// waiter's grant watch counts only once the server confirms, at that moment, that the claim is
// this token's (DESIGN.md, "Grants and messages"), and a message older than the last try that
// found the waiter waiting answered an earlier try: it is dropped unread.
// Thread safety: as the attempt (not thread-safe).
#pragma once

#include <chrono>
#include <optional>

#include "Attempt.h"
#include "dlock/IFairOperator.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

// Held when `grants` hears, within `pause`, a grant that answers the last try and `extend`
// confirms it: `extend(sentAt)` extends the claim to the ttl, sent at `sentAt`, and returns the
// server's answer (nullopt: none came), within the pause's call budget. Else nullopt: try again.
template <class Extend>
std::optional<Held> confirmedGrant(IGrantWatch& grants, const WaitState& state, const Pause& pause,
                                   const AttemptTools& tools, Extend&& extend) {
  Grant grant = grants.waitForGrant(pause.sleep);
  while (grant.kind == Grant::Kind::Granted && grant.backendMillis < state.last.backendMillis) {
    grant = grants.waitForGrant(std::chrono::milliseconds(0));  // answered an earlier try: dropped
  }
  if (grant.kind != Grant::Kind::Granted) return std::nullopt;
  Clock::time_point extendSent;
  std::optional<bool> ours;
  {
    const CallBudget budget(pause.callDeadline);
    ours = extend(extendSent);
  }
  if (ours.value_or(false)) return Held{grant.fencingToken, extendSent, tools.ttl};
  // Not ours (the claim ran out while we were away) or no answer: the next try asks again.
  const Log log = logger();
  if (log->should_log(spdlog::level::debug)) {
    log->debug("dlock: a grant of {} on {} was {}; asking again", quoteKey(tools.key), tools.backend->describe(),
               ours ? "no longer ours" : "not confirmed");
  }
  return std::nullopt;
}

}  // namespace dlock::detail
