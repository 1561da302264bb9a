// SPDX-License-Identifier: Apache-2.0
// ReadWriteScripts.h — the Lua scripts of the read-write lock (IReadWriteOperator.h) on the fair
// queue's hand-off. Every script touches the keys of one hash tag (KeyNames::rw…), apart from the
// exclusive lock's keys so a 0.2 client of the same name is not disturbed, and always declares
// them in this order:
//
//   KEYS: writer (the writer's token, PX its lease), readers (a sorted set of reader tokens by
//         lease end, server ms), queue (a list of places `mode token|ttl.listener`, mode 'r' or
//         'w'), waiter leases (a sorted set of the same places by expiry, server ms), fence
//
//   rwAcquire    ARGV: token, mode ('r' or 'w'), ttl-ms, fence-ttl-ms, waiter-lease-ms (0: never
//                queued), channel, record, listener
//                → {1, "fence", "now-ms", validity-ms} taken (0: the whole ttl), or ours already
//                  (what is left); a reader's fence is the last writer's ("0" before any)
//                → {0, holders' longest PTTL, "now-ms", position} (position 0: not queued)
//   rwRelease    ARGV: token, mode, channel, record, record-floor-ms, fence-ttl-ms
//                → {1, admitted} released, `admitted` waiters handed a hold
//                → {2, 0} released earlier by this token (its record of this mode); {0, 0} not ours
//   rwDowngrade  ARGV: token, ttl-ms, channel, fence-ttl-ms → 1 the writer now reads; 0 not the writer
//   rwUpgrade    ARGV: token, ttl-ms, fence-ttl-ms → as rwAcquire, never queued
//   rwExtend     KEYS: (writer, readers) per hold   ARGV: ttl-ms, (token, mode) per hold
//                → {1|0 per hold}: the token's own hold of that mode renewed
//   rwLeave      ARGV: token, mode, ttl-ms, channel, record, record-floor-ms, listener, fence-ttl-ms
//                → 1 a hold granted to the token meanwhile was released (handed on); 0 otherwise
//   rwInspect    → {"now-ms", writer or "", writer's PTTL, "fence", {reader, "lease end"}..., {place}...}
//
// The record (`…:rw:released:<token>`, named in ARGV as the fair lock's) is 'r' or 'w' once a
// release of that hold ran, '0' once the token left for good (a tombstone: its acquire refused).
// A hand-off publishes `token|fence|now-ms|claim-ms` on `channel:listener`, as the fair lock's.
// The readers key lives at least as long as its longest lease, the queue keys as their longest
// waiter lease, the writer its lease, the counter the fence ttl, a record the hold's lease (at
// least the floor): no key without a TTL.
#pragma once

#include "Scripts.h"

namespace dlock::detail {

const Script& readWriteAcquireScript(bool sharded);
const Script& readWriteReleaseScript(bool sharded);
const Script& readWriteDowngradeScript(bool sharded);
const Script& readWriteUpgradeScript();
const Script& readWriteExtendScript();
const Script& readWriteLeaveScript(bool sharded);
const Script& readWriteInspectScript();

}  // namespace dlock::detail
