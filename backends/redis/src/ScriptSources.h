// SPDX-License-Identifier: Apache-2.0
// ScriptSources.h — the release script's Lua source (ReleaseSource.cpp). The fault tests' broken
// release (tests/nemesis/broken/) is test code sent in its place, not a build of the library.
#pragma once

#include <string>

namespace dlock::detail {

// The release script, publishing with `publish` (PUBLISH, or SPUBLISH on a cluster).
// KEYS: lock   ARGV: token, channel, release record, record floor in ms, '1' for a cancel,
// waiter registry, owner record
// → {1, subscribers reached} released now; {2, 0} released earlier by this token; {0, 0} not ours
// (a cancel then leaves a tombstone record that makes the acquire script refuse the token)
std::string releaseSource(const char* publish);

// Lua helpers over a key's waiter registry (Scripts.h), shared by the acquire and the release:
// serverMillis(), registerWaiter(key, text, listener, leaseMs, nowMs), dropWaiter(key, text,
// listener) and wakeOne(key, text, channel, nowMs), which publishes with `publish`.
std::string waiterRegistryPrelude(const char* publish);

}  // namespace dlock::detail
