// SPDX-License-Identifier: Apache-2.0
// ServerWrites.h — check 11, from the server's own record (ServerObserver.h): no lock key is
// deleted or overwritten except by its holder's release or after its expiry.
//
// Per server and key, in the server's order, a model of the key: its owner token and when it
// expires (the SET's PX or the last PEXPIRE, counted from the script call that ran it, which is
// no later than the server's own start of the lease: the model's expiry errs early, never late).
// A DEL, a SET for another owner or a PEXPIRE of a key the model holds unexpired must come from a
// command that carries the owner's token (its release, its leave, a hand-off by its fair release,
// its extend); any other fails. A server-watch marker (a new connection, a stream whose stamps
// turned placeable or not) makes the server's keys unknown until each is set or deleted again:
// what ran unseen (a restart that lost the keys) is never judged. A fault that moves a server's
// clock skips no record: a key's expiry and every command are counted on that server's own clock
// (MONITOR's stamp), the clock its keys expire by, so a jump ahead expires the model's keys as it
// expires the server's. Only a key whose life spans a move of the clock (the fault's start or
// end, or all of a strobe) is forgotten: it may have expired unseen while the clock was ahead.
//
// Orphan grants: a SET for an owner token that no client's completed acquisition of that key
// named (an acquire whose caller gave up, a hand-off to a waiter that left) blocks the key for a
// client nobody is. Each must be given back (deleted, set for another owner, or expired) within
// the lease it was granted with (its PX): one renewed, granted again to its token or set without
// a TTL fails. An orphan whose end went unseen (a server-watch marker) is not judged.
//
// Releases (a record of one server): a release its client saw return ok must have ended its
// owner's hold of the key on the server by then: a key still set for that owner, unexpired, more
// than kReleaseSlack after the release returned (the record's times are the server's stamps
// mapped to this host's clock) is a release that reported what the server never did. Judged only
// where the key's set, last extend and end are timed by the server's stamp (not by the moment the
// observer read them, as while a clock moved) and no move of the clock falls inside its stretch.
// Plain functions over values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

struct ServerWritesResult {
  long long judged = 0;      // DELs, SETs and PEXPIREs of a key the model knew
  long long violations = 0;  // ... that deleted, overwrote or extended another holder's live key
  std::string first;         // the first violation, described
  long long orphanGrants = 0;      // SETs for an owner no client's completed acquisition named
  long long orphanViolations = 0;  // ... kept past the lease it was granted with
  std::int64_t orphanMaxUs = 0;    // the longest an orphan grant was kept
  std::string firstOrphan;
  long long releasesJudged = 0;  // releases that returned ok, of a key the record knew
  long long releasesKept = 0;    // ... whose key the server still held for their owner
  std::string firstKept;
};

inline constexpr std::int64_t kReleaseSlackNs = 50'000'000;

[[nodiscard]] ServerWritesResult checkServerWrites(const std::vector<Op>& history);

}  // namespace dlock::nemesis
