// SPDX-License-Identifier: Apache-2.0
#include "FairScripts.h"

namespace dlock::detail {

// The release hands the key to the first live waiter in the same script (no re-acquire round
// trip), else deletes it. It leaves the same release record as the default release (see
// ReleaseSource.cpp), written with pcall for the same reasons, so a retried release is decided by
// the server's evidence: "released earlier" only when the record says so ('1': a tombstone, '0',
// left by a cancel or a queue leave, is no release).
// No prune here, on the hand-off's path: handOff skips and drops a head whose place ran out, and
// the waiters' own attempts prune the rest of the queue.
std::string fairReleaseBody() {
  return R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  local nowMs, micros = serverNow()
  local heir = handOff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs, micros, ARGV[5], ARGV[2])
  redis.pcall('SET', ARGV[3], '1', 'PX', math.max(left, tonumber(ARGV[4])))
  if heir then return {1, 1} end
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
if redis.pcall('GET', ARGV[3]) == '1' then return {2, 0} end
return {0, 0}
)lua";
}

}  // namespace dlock::detail
