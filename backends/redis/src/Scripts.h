// SPDX-License-Identifier: Apache-2.0
// Scripts.h — the Lua scripts of the lock protocol and how they are called.
//
//   acquire  KEYS: lock, fence   ARGV: token, ttl-ms, fence-ttl-ms
//            → {1, "fencing token"} taken (or already ours: a retried acquire is idempotent)
//            → {0, holder's PTTL} busy
//   release  KEYS: lock          ARGV: token, channel, release record, record-floor-ms
//            → {1, subscribers reached} deleted, PUBLISHed on the channel, recorded
//            → {2, 0} released earlier by this token (the record of a try whose reply was lost)
//            → {0, 0} not ours, and no record that it was
//   extend   KEYS: lock          ARGV: token, ttl-ms   → 1 extended, 0 not ours
//   extendMany KEYS: locks...    ARGV: ttl-ms, tokens... → {1|0 per key}: the watchdog's batch in
//            one command (on a cluster, the keys of one slot)
//   inspect  KEYS: lock, fence   → {PTTL, "last fencing token"}
//   raiseFence KEYS: fence       ARGV: at-least, fence-ttl-ms → "the counter", raised to at least ARGV[1]
//
// Fencing tokens travel as text: exact in 64 bits, where Lua's numbers are doubles.
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
};

const Script& acquireScript();
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

}  // namespace dlock::detail
