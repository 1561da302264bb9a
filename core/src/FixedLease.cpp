// SPDX-License-Identifier: Apache-2.0
#include "FixedLease.h"

#include <string>
#include <vector>

#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock::detail {

using std::chrono::milliseconds;

void extendFixedLease(LeaseState& lease, IOperator& backend, const Clock& clock, LockCounters& counters, milliseconds ttl) {
  const std::string what = "dlock: extend " + quoteKey(lease.key) + " on " + backend.describe();
  if (lease.inheritedAcrossFork()) throw NotOwnerError(what + ": acquired by the parent process before fork()");
  if (lease.renewed) throw InvalidArgumentError(what + ": the watchdog renews this lease; extend is for a fixed lease time");
  if (lease.phase() != LeasePhase::Held || !lease.validAt(clock.now())) {
    throw LockLostError(what + ": the lease had ended (fencing token " + std::to_string(lease.fencingToken) + ")");
  }
  const Clock::time_point sentAt = clock.now();
  const std::vector<ExtendResult> results = backend.extendAll({LeaseRef{lease.key, lease.token}}, ttl);
  const ExtendResult result = results.empty() ? ExtendResult{false, true, milliseconds(0)} : results.front();
  if (result.unknown) throw ConnectionError(what + ": no answer; the lease is as it was");
  if (!result.extended) {
    if (lease.transition(LeasePhase::Held, LeasePhase::Lost)) counters.lostLeases.fetch_add(1, std::memory_order_relaxed);
    throw LockLostError(what + ": the lease had expired or was taken (fencing token " +
                        std::to_string(lease.fencingToken) + "); the critical section was not protected");
  }
  lease.setDeadline(sentAt + knownValidity(result.validity, ttl));
}

milliseconds remainingOf(const LeaseState& lease, const Clock& clock) {
  const Clock::time_point now = clock.now();
  if (lease.finished() || !lease.validAt(now)) return milliseconds(0);
  return std::chrono::duration_cast<milliseconds>(lease.deadline() - now);
}

}  // namespace dlock::detail
