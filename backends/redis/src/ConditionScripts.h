// SPDX-License-Identifier: Apache-2.0
// ConditionScripts.h — the Lua scripts of a lock's conditions (IConditionOperator.h). A condition
// is two keys under the lock's hash tag (KeyNames::condition): its waiters, a list of places
// `token|ttl.listener` (the fair queue's form, so a signal moves a place as it is), longest waiter
// first, and their waiter leases, a sorted set of the same places by expiry (server ms).
//
//   condAwait      KEYS: lock, waiters, leases   ARGV: token, channel, release record,
//                  record-floor-ms, '0', the key's waiter registry, ttl-ms, listener,
//                  waiter-lease-ms, owner
//   condAwaitFair  KEYS: lock, queue, fair leases, fence, waiters, leases   ARGV: token, grant
//                  channel, release record, record-floor-ms, fence-ttl-ms, ttl-ms, listener,
//                  waiter-lease-ms, the caller's "fencing token"
//                  → {1, notified, position} the key released and the token on the condition
//                  → {2, 0, position} an earlier try ran (position 0: signalled since, or on a fair
//                    key handed it under a later fence); {0, 0, 0} not ours: nothing joined
//                  The release is the lock's own, run first as a function: condAwait's is the
//                  exclusive release (ScriptSources.h, its ARGV in its places, the owner record
//                  last), condAwaitFair's the fair release (FairScripts.h), so a change to either
//                  flows into these. A fair key's release record goes again at once: the waiter's
//                  next hold of the key is a hand-off to the same token, whose later release must
//                  not read this one as its own evidence.
//   condSignal     KEYS: lock, waiters, leases[, queue, fair leases]   ARGV: token, 'all' or 'one',
//                  'fair' or 'exclusive', signal channel
//                  → {1, moved} the token holds the key; {0, 0} it does not: nothing moved
//                  A fair key's waiter goes to its queue's tail with the rest of its waiter lease;
//                  an exclusive key's is told `token|0|now-ms|0` on `channel:listener`, its
//                  process's signal channel (KeyNames::signalChannel). Ended places are dropped.
//   condRenew      KEYS: (waiters, leases) per waiter   ARGV: waiter-lease-ms, listener, (token,
//                  ttl-ms) per waiter → {1|0 per waiter}: 1 still waiting (its lease renewed)
//   condLeave      KEYS: waiters, leases   ARGV: token, ttl-ms, listener → 1 it was waiting, else 0
//   condInspect    KEYS: waiters, leases → {"now-ms", place, "lease end"...} live waiters in order
//
// The two keys live as long as the longest waiter lease in them (PEXPIRE GT, as the fair queue's)
// and vanish with their last place: no key without a TTL.
#pragma once

#include "Scripts.h"

namespace dlock::detail {

const Script& conditionAwaitScript(bool fair, bool sharded);
const Script& conditionSignalScript(bool sharded);
const Script& conditionRenewScript();
const Script& conditionLeaveScript();
const Script& conditionInspectScript();

}  // namespace dlock::detail
