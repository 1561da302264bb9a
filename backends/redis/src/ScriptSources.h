// SPDX-License-Identifier: Apache-2.0
// ScriptSources.h — Lua sources that a test build may replace: ReleaseSource.cpp is the release
// of every build; the fault-testing harness links a broken one in its place (CMake option
// DLOCK_BREAK_RELEASE_CHECK, tests/nemesis/broken/) to show that its checker catches it.
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
