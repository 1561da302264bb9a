// SPDX-License-Identifier: Apache-2.0
// ReplicaWait.h — wait_replicas (RedisOperatorOptions::waitReplicas): WAIT after a write that must
// outlive a failover, on the connection that made it and before that connection goes back. WAIT
// counts the replicas that have this connection's writes up to its last one, so it covers another
// client's earlier write (a hand-off) only once this connection has written after it.
// Used by every primitive of RedisOperator: the lock, the fair lock, read-write locks, semaphores.
#pragma once

#include <functional>
#include <string>

#include "Connection.h"
#include "RedisOperatorOptions.h"
#include "Replies.h"

namespace dlock::detail {

// Undoes an acquire whose replicas did not acknowledge it (its release, on the same connection)
// and says how that went, for the message: "released it", "it had ended already". What it throws
// is reported as "could not release it; it ends at its TTL".
using UndoAcquire = std::function<std::string(Connection& connection)>;

// After an acquire on `connection`: returns at once without wait_replicas, or once enough replicas
// acknowledged it. Otherwise undoes it and throws ConnectionError (too few within the wait
// timeout, or a "not now" reply) or BackendError (WAIT refused: an ACL without it); the message
// says how the undo went.
void awaitReplicas(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where,
                   const UndoAcquire& undo);

// After renewals on `connection`: whether enough replicas have them (true without wait_replicas).
// A renewal only the master holds does not count: a master cut off from its replicas and
// sentinels (split brain) would otherwise go on renewing a lease that the replica promoted in its
// place lets expire, and the holder would never be told. Unconfirmed, a lease keeps its earlier
// deadline. Logs a warning when not.
bool renewalsReplicated(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where);

// renewalsReplicated for one renewal: throws ConnectionError when not.
void requireRenewalReplicated(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where);

}  // namespace dlock::detail
