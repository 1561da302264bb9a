// SPDX-License-Identifier: Apache-2.0
// FairScripts.h — the Lua scripts of the fair lock: a FIFO queue of waiters per key, handed the
// key by the release itself (see DESIGN.md, "Fair lock"). Every script touches the keys of one
// hash tag (KeyNames): the lock, the queue (a list of `token|ttl.listener` entries), the waiter
// leases (a sorted set of the same entries by expiry, server ms) and the fencing counter.
//
//   fairAcquire  KEYS: lock, queue, leases, fence   ARGV: token, ttl-ms, fence-ttl-ms,
//                waiter-lease-ms (0: never queued), channel, release record (a '0' there: the
//                token left for good, refused), listener
//                → {1, "fence", "now-ms", validity-ms} taken (0: the whole ttl), or ours already
//                  (a retried acquire, a hand-off whose message is on its way: what is left)
//                → {0, holder's PTTL, "now-ms", position} queued (position 0 when not queued)
//   fairRelease  KEYS: lock, queue, leases, fence   ARGV: token, channel, release record,
//                record-floor-ms, fence-ttl-ms
//                → {1, 1} handed to the head waiter; {1, 0} deleted (nobody waits)
//                → {2, 0} released earlier by this token (its record); {0, 0} not ours
//   fairLeave    KEYS: lock, queue, leases, fence   ARGV: token, ttl-ms, fence-ttl-ms, channel,
//                release record, record-floor-ms (the tombstone's life), listener
//                → 1 the key had been handed to us and was passed on; 0 otherwise
//
// A hand-off publishes `token|fence|now-ms|claim-ms` on the heir's listener channel,
// `channel:listener` (the claim lease: the heir's ttl, or the rest of its waiter lease if less);
// each waiter of a process listens there for its own token. The queue keys live as long as the
// longest waiter lease in them and vanish with their last entry; the lock has its ttl, the
// counter its fence ttl: no key without a TTL.
// The queue helpers (prune, handOff) are one prelude so later queue-based locks (read-write,
// semaphore) can share them.
#pragma once

#include <string>

#include "Scripts.h"

namespace dlock::detail {

const Script& fairAcquireScript(bool sharded);
const Script& fairReleaseScript(bool sharded);
const Script& fairLeaveScript(bool sharded);

// The queue prelude with `publish` (PUBLISH, or SPUBLISH on a cluster).
std::string fairQueuePrelude(const char* publish);
// The release body (FairReleaseSource.cpp).
std::string fairReleaseBody();

}  // namespace dlock::detail
