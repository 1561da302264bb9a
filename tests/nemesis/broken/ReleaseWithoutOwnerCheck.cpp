// SPDX-License-Identifier: Apache-2.0
// A deliberately BROKEN release, linked instead of backends/redis/src/ReleaseSource.cpp only by
// the fault-testing harness's build (CMake option DLOCK_BREAK_RELEASE_CHECK): it deletes the key
// whoever owns it, so a holder whose lease ran out releases its successor's hold. The harness's
// checker must catch it (scripts/nemesis --broken).
#include "redis/src/ScriptSources.h"

namespace dlock::detail {

std::string releaseSource(const char* publish) {
  return std::string(R"lua(
local notified = redis.call(')lua") + publish + R"lua(', ARGV[2], '1')
return {redis.call('DEL', KEYS[1]), notified}
)lua";
}

}  // namespace dlock::detail
