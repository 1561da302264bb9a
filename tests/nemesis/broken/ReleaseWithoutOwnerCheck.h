// SPDX-License-Identifier: Apache-2.0
// ReleaseWithoutOwnerCheck.h — a deliberately BROKEN release, test code only: the script that
// `dlock_nemesis_client --broken release-check` (BrokenOperator.h) sends in place of the
// library's release. It deletes the key whoever owns it, so a holder whose lease ran out releases
// its successor's hold; the fault tests' checker must catch it (scripts/nemesis --broken).
#pragma once

namespace dlock::nemesis::broken {

// KEYS: the lock key   ARGV: the releasing token (sent, as the library's release sends it, and
// never compared), the key's release channel
// → the subscribers the release reached when it deleted a key; -1 when there was none
inline constexpr const char* kReleaseWithoutOwnerCheck = R"lua(
local notified = redis.call('PUBLISH', ARGV[2], '1')
if redis.call('DEL', KEYS[1]) == 1 then return notified end
return -1
)lua";

}  // namespace dlock::nemesis::broken
