// SPDX-License-Identifier: Apache-2.0
// FairOrder.h — check 10, the fair lock's own invariant, from the server's record of its queue
// (ServerObserver.h): grants in queue order, and no grant to a waiter that left.
//
// The record, per key, in the server's order: server-enqueue (RPUSH of a waiter, value = its
// token), server-leave (LREM: the waiter left, or its waiter lease ran out and it was pruned),
// server-unqueue (ZREM: taken off the queue, to be handed the key or skipped), server-set (SET of
// the lock key: a grant), server-tombstone (the leave's first write, the token's tombstone: the
// waiter gave up, whether or not the leave then takes its entry out). A model queue replays
// them; it fails when
//   - a waiter is taken off the queue while another is ahead of it (out of order), or
//   - the key is set for a token that was neither just taken off the head nor the first of an
//     empty queue (a newcomer barged past the waiters), or
//   - the key is set for a token that left the queue (or whose leave ran) and did not join it again.
// A waiter handed the key just before it died or gave up is no violation: the grant came first,
// and its claim lease bounds the cost. Each server is replayed on its own, in its stream's order:
// a replica shows no commands, so a promoted one starts with queues it has not seen filled, and
// after a server-watch marker (a connection) the model knows only the waiters it sees join.
// Plain functions over values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

struct FairOrderResult {
  long long grants = 0;      // server-set records replayed
  long long violations = 0;  // out of order, barged, or to a waiter that left
  std::string first;         // the first violation, described
};

[[nodiscard]] FairOrderResult checkFairOrder(const std::vector<Op>& history);

}  // namespace dlock::nemesis
