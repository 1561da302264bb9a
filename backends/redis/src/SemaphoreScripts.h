// SPDX-License-Identifier: Apache-2.0
// SemaphoreScripts.h — the Lua scripts of the counting semaphore (ISemaphoreOperator.h). Every
// script touches the three keys of one hash tag (semExtendMany: of each of its names, all in one
// slot on a cluster), all declared in KEYS (KeyNames::semaphore):
//
//   state      a hash: '#capacity', '#used' (permits held), '#fence' (the last fencing token),
//              '#waiting' (places in the queue), '#next' (no later than the earliest deadline in
//              `deadlines`; '' when it is empty), '#expires' (when the three keys expire, ms), and
//              one field per token, its one state: 'h|permits|fence' holding,
//              'w|permits|lease-ms|listener' waiting, 'r' released, 't' left (a tombstone)
//   deadlines  a sorted set: each token by the end of its state in server ms (a hold's lease, a
//              place's waiter lease, a record's life)
//   queue      a list of waiting tokens, head first
//
//   semAcquire  ARGV: token, permits, capacity, lease-ms, waiter-lease-ms (0: never queued),
//               channel, listener, key-life-ms
//               → {1, "fence", "now-ms", validity-ms} taken (0: the whole lease), or ours already
//                 (a retry, a grant whose message is on its way: what is left)
//               → {0, next-expiry-ms, "now-ms", position} not taken (position 0: not queued)
//               → {2, 0, "now-ms", 0} the token was released or left: refused
//               → {3, "stored capacity", "now-ms", 0} the semaphore has another capacity
//   semRelease  ARGV: token, channel, record-ms, key-life-ms
//               → {1, admitted} released; {2, 0} released earlier by this token; {0, 0} not ours
//   semExtend   ARGV: token, lease-ms, channel, key-life-ms → 1 extended, 0 not ours
//   semExtendMany  KEYS: the three keys of each name (state, deadlines, queue), name after name
//               ARGV: lease-ms, key-life-ms, n (names), n channels (one per name, in KEYS' order),
//               then (name index from 1, token) per lease → {1|0 per lease}, each as semExtend
//   semLeave    ARGV: token, channel, record-ms, key-life-ms → 1 permits granted to it were
//               released, 0 otherwise; the token is refused from then on
//   semResize   ARGV: capacity, channel, key-life-ms → waiters admitted
//   semInspect  ARGV: none → {"capacity" ('0': none), "now-ms", {token, permits, remaining-ms,
//               "fence"}..., {token, permits}...} live holders by lease end, live waiters in order
//
// Every script but inspect first reclaims what is due by the server's clock (TIME): holders whose
// lease ended (their permits go back), places whose waiter lease ended, spent records; then the
// head waiters that fit are admitted, in order, stopping at the first that does not fit. An
// admitted waiter holds its permits for a claim lease (its lease, or what is left of its waiter
// lease if less) and is told `token|fence|now-ms|claim-ms` on `channel:listener`, its process's
// grant channel, as the fair lock's heir is (FairScripts.h). The three keys expire together at
// '#expires': never before the latest deadline in them, and at least key-life / 2 after the last
// call that wrote (the fence TTL: a day by default). A semaphore idle past that is forgotten, its
// capacity too: the next user stores its own; fencing tokens still rise (the clock floor).
#pragma once

#include "Scripts.h"

namespace dlock::detail {

const Script& semaphoreAcquireScript(bool sharded);
const Script& semaphoreReleaseScript(bool sharded);
const Script& semaphoreExtendScript(bool sharded);
const Script& semaphoreExtendManyScript(bool sharded);
const Script& semaphoreLeaveScript(bool sharded);
const Script& semaphoreResizeScript(bool sharded);
const Script& semaphoreInspectScript();

}  // namespace dlock::detail
