// SPDX-License-Identifier: Apache-2.0
// ServerWrites.h — check 11, from the server's own record (ServerObserver.h): no lock key is
// deleted or overwritten except by its holder's release or after its expiry.
//
// Per server and key, in the server's order, a model of the key: its owner token and when it
// expires (the SET's PX or the last PEXPIRE, counted from the script call that ran it, which is
// no later than the server's own start of the lease: the model's expiry errs early, never late).
// A DEL, or a SET for another owner, of a key the model holds unexpired must come from a command
// that carries the owner's token (its release, its leave, a hand-off by its fair release); any
// other fails. A server-watch marker (a new connection, lines whose time could not be placed)
// makes the server's keys unknown until each is set or deleted again: what ran unseen (a restart
// that lost the keys) is never judged. Nor is anything during a fault that moves a server's clock
// (its name says "clock"): a clock ahead expires keys early, unseen; the keys are unknown from
// its start until after its end.
// Plain functions over values; thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

struct ServerWritesResult {
  long long judged = 0;      // DELs and SETs of a key the model knew
  long long violations = 0;  // ... that deleted or overwrote another holder's live key
  std::string first;         // the first violation, described
};

[[nodiscard]] ServerWritesResult checkServerWrites(const std::vector<Op>& history);

}  // namespace dlock::nemesis
