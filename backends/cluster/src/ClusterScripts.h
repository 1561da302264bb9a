// ClusterScripts.h — what the cluster adds to the common scripts (Scripts.h).
//
//   shardedReleaseScript  KEYS: lock   ARGV: token, channel
//                         → {1, subscribers reached} deleted and SPUBLISHed on the channel
//                         → {0, 0} not ours
//   runScriptAsking       one script call after ASKING, on the same connection, in one round trip
//
// Why the channel is an ARGV and not declared in KEYS (checked against Redis 7.0.15): inside a
// script, SPUBLISH is checked like a key access — its channel must hash to the slot of the
// declared keys, which it does (it shares the lock's hash tag), else the script fails *after*
// the DEL. Declaring it in KEYS makes it count as a key for EVAL's own routing, and a channel is
// never a stored key: while its slot migrates, the source answers TRYAGAIN ("multiple keys, some
// missing") until the slot is handed over, and so does the target after ASKING. Undeclared, the
// shard channel is served where the lock key is — the source while MIGRATING, the target after
// ASKING — because Redis does not count shard channels as missing keys during a migration.
#pragma once

#include "Connection.h"
#include "Scripts.h"

namespace dlock::detail {

const Script& shardedReleaseScript();

// ASKING then EVAL (the source, so the target needs no cached script), pipelined: the target of
// an ASK redirection serves the importing slot only for the command right after ASKING.
ReplyPtr runScriptAsking(Connection& connection, const Script& script, const Argv& keys, const Argv& args);

}  // namespace dlock::detail
