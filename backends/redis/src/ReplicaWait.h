// SPDX-License-Identifier: Apache-2.0
// ReplicaWait.h — wait_replicas (RedisOperatorOptions::waitReplicas): WAIT after a write that must
// outlive a failover, on the connection that made it and before that connection goes back. WAIT
// counts the replicas that have this connection's writes up to its last one, so it covers another
// client's earlier write (a hand-off) only once this connection has written after it.
// Used by every primitive of RedisOperator: the lock, the fair lock, read-write locks, semaphores.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "Connection.h"
#include "RedisOperatorOptions.h"
#include "Replies.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

// Undoes an acquire whose replicas did not acknowledge it (its release, on the same connection)
// and says how that went, for the message: "released it", "it had ended already". What it throws
// is reported as "could not release it; it ends at its TTL".
using UndoAcquire = std::function<std::string(Connection& connection)>;

// An undo's words for a release's outcome.
inline std::string releasedOrEnded(const ReleaseResult& release) {
  return release.released ? "released it" : "it had ended already";
}

// After an acquire on `connection`: returns at once without wait_replicas, or once enough replicas
// acknowledged it. Otherwise undoes it and throws ConnectionError (too few within the wait
// timeout, or a "not now" reply) or BackendError (WAIT refused: an ACL without it); the message
// says how the undo went.
void awaitReplicas(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where,
                   const UndoAcquire& undo);

// Renews a hold found ours already, on the same connection, to the caller's whole ttl: true when
// it still was ours.
using RenewHold = std::function<bool(Connection& connection)>;

// awaitReplicas for a queued primitive's acquire (fair, read-write, semaphore), whose `result`
// (FairAcquireResult, SemaphoreAcquireResult) said acquired. A hold that was ours already (nonzero
// validity: a hand-off found by a try, a retried acquire) was written by another call, maybe on
// another connection, and WAIT is documented to count this connection's writes only (Redis 7.0
// also counts its reads; that is not promised): `renew` runs first, a write that follows the
// hand-off in the replication stream, and the hold then has the whole ttl (validity zero).
// Found ended by then, `result` says not acquired (and not queued).
template <class Result>
void confirmAcquire(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where,
                    Result& result, const RenewHold& renew, const UndoAcquire& undo) {
  if (!result.acquired || options.waitReplicas == 0) return;
  if (result.validity.count() != 0) {
    if (!renew(connection)) {
      Result ended;
      ended.backendMillis = result.backendMillis;
      result = ended;
      return;
    }
    result.validity = std::chrono::milliseconds(0);
  }
  awaitReplicas(options, connection, where, undo);
}

// After renewals on `connection`: whether enough replicas have them (true without wait_replicas).
// A renewal only the master holds does not count: a master cut off from its replicas and
// sentinels (split brain) would otherwise go on renewing a lease that the replica promoted in its
// place lets expire, and the holder would never be told. Unconfirmed, a lease keeps its earlier
// deadline. Logs a warning when not.
bool renewalsReplicated(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where);

// renewalsReplicated for one renewal: throws ConnectionError when not.
void requireRenewalReplicated(const RedisOperatorOptions& options, Connection& connection, const ReplySource& where);

}  // namespace dlock::detail
