// KeyScan.h — the keys of one lock server that have no TTL, for the checker's TTL check.
#pragma once

#include <string>
#include <vector>

namespace dlock::nemesis {

// SCANs "host:port" for keys matching `pattern` (e.g. "dlock:*") whose PTTL is -1.
// StoreError when the server cannot be reached or answers with an error.
[[nodiscard]] std::vector<std::string> keysWithoutTtl(const std::string& address, const std::string& pattern);

}  // namespace dlock::nemesis
