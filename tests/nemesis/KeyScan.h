// SPDX-License-Identifier: Apache-2.0
// KeyScan.h — the keys of one lock server that have no TTL, for the checker's TTL check.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dlock::nemesis {

// SCANs "host:port" for keys matching `pattern` (e.g. "dlock:*") whose PTTL is -1.
// StoreError when the server cannot be reached or answers with an error within `timeout` per
// command (short for the samples taken during faults: a paused server never answers).
[[nodiscard]] std::vector<std::string> keysWithoutTtl(const std::string& address, const std::string& pattern,
                                                      std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace dlock::nemesis
