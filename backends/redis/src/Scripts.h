// SPDX-License-Identifier: Apache-2.0
// Scripts.h — the Lua scripts of the lock protocol and how they are called.
//
//   acquire  KEYS: lock, fence   ARGV: token, ttl-ms, fence-ttl-ms, release record, waiter
//            registry, listener ('' for none), registration-ms, '1' to keep the listener's entry
//            → {1, "fencing token"} taken (or already ours: a retried acquire is idempotent); the
//              listener's registry entry goes (moves to the end when kept)
//            → {0, holder's PTTL} busy (or {0, 0}: the token was cancelled, its record a tombstone);
//              the listener is registered, or its entry renewed, for registration-ms
//   acquireRecordingOwner  KEYS: lock, fence, owner   ARGV: as acquire's, then label
//            → as acquire; when it takes the key, also SETs owner to "token\nsince-µs\nlabel"
//            with the lease's TTL (the owner record, KeyNames::owner)
//   release  KEYS: lock          ARGV: token, channel, release record, record-floor-ms, '1' for a
//            cancel, waiter registry, owner
//            → {1, subscribers reached} deleted, PUBLISHed on the channel and to the longest
//              registered live waiter not woken yet, on its `channel:listener`, which keeps its
//              place until its process gets the key (ReleaseSource.cpp), recorded
//            → {2, 0} released earlier by this token (the record of a try whose reply was lost)
//            → {0, 0} not ours, and no record that it was (a cancel leaves a tombstone record)
//            The owner record, always the last ARGV, is dropped with the key (kDropOwnerRecord).
//   extend   KEYS: lock          ARGV: token, ttl-ms, owner   → 1 extended, 0 not ours
//   extendMany KEYS: locks...    ARGV: ttl-ms, tokens..., owners... → {1|0 per key}: the
//            watchdog's batch in one command (on a cluster, the keys of one slot)
//            Both extends renew the owner records with their leases.
//   inspect  KEYS: lock, fence   ARGV: owner
//            → {PTTL, "last fencing token"[, "since-µs\nlabel" when the holder recorded one]}
//   raiseFence KEYS: fence       ARGV: at-least, fence-ttl-ms → "the counter", raised to at least ARGV[1]
//
// The waiter registry (KeyNames::waiters) lists the processes waiting for the key, each by the
// listener its wake-up channel is named after, so that a release wakes one of them rather than
// every waiter (Scripts.cpp has its format).
//
// Fencing tokens travel as text: exact in 64 bits, where Lua's numbers are doubles.
//
// The scripts that change a hold refuse to run after their caller gave up (makeBoundScript).
//
// Scripts go by EVALSHA with locally computed digests; on NOSCRIPT (a restart, a failover,
// SCRIPT FLUSH, a new cluster node) the call is repeated as EVAL, which also caches the script.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "Connection.h"

namespace dlock::detail {

struct Script {
  const char* name;
  std::string source;
  std::string sha;
  // Refused by the server once its caller stopped waiting for it (makeBoundScript).
  bool refusesLate = false;
};

// A script and its digest.
[[nodiscard]] Script makeScript(const char* name, std::string source);

// A script that takes, queues, re-takes, extends or changes a hold, or signals: it goes with one
// more ARGV, the instant in the server's clock (ms) after which its caller no longer waits for
// the reply (Connection::refuseAfter), and the server refuses it past that instant, changing
// nothing: the error reply "DLOCKLATE ...", read as LateCallError. Whatever the delay (a paused
// server, a slow path), a call its client gave up never takes effect later, with no second
// connection and no admin command. The prelude takes the extra ARGV off before the body runs, so
// the body sees the ARGV its documentation lists.
[[nodiscard]] Script makeBoundScript(const char* name, const std::string& body);

const Script& acquireScript();
const Script& acquireRecordingOwnerScript();
const Script& releaseScript();
const Script& shardedReleaseScript();  // the release with SPUBLISH (Redis Cluster)
const Script& extendScript();
const Script& extendManyScript();
const Script& inspectScript();
const Script& raiseFenceScript();

// Runs `script` on `connection`; error replies other than NOSCRIPT are returned as they are.
ReplyPtr runScript(Connection& connection, const Script& script, const Argv& keys, const Argv& args);

// Runs `script` on the node importing a migrating slot: ASKING, then EVAL, on this connection.
ReplyPtr runScriptAsking(Connection& connection, const Script& script, const Argv& keys, const Argv& args);

// Runs `script` once per (keys, args) call in one pipeline: one round trip (two if the server
// had lost the script). Replies in order.
std::vector<ReplyPtr> runScriptPipelined(Connection& connection, const Script& script,
                                         const std::vector<std::pair<Argv, Argv>>& calls);

// One call of runScriptsPipelined: a script and its KEYS and ARGV.
struct PipelinedScript {
  const Script* script;
  Argv keys;
  Argv args;
};

// runScriptPipelined with a script of its own per call (the watchdog's round of every kind).
std::vector<ReplyPtr> runScriptsPipelined(Connection& connection, const std::vector<PipelinedScript>& calls);

}  // namespace dlock::detail
