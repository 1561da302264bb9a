// SPDX-License-Identifier: Apache-2.0
// A BROKEN fair release for tests only (CMake option DLOCK_BREAK_FAIR_ORDER): it hands the key to
// the newest waiter instead of the oldest. The FIFO tests must fail on a build with it; that is how
// they show they can.
#include "redis/src/FairScripts.h"

namespace dlock::detail {

std::string fairReleaseBody() {
  return R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local left = redis.call('PTTL', KEYS[1])
  local nowMs, micros = serverNow()
  prune(KEYS[2], KEYS[3], nowMs, nil)
  local newest = redis.call('LINDEX', KEYS[2], -1)
  if newest then
    redis.call('LREM', KEYS[2], 1, newest)
    redis.call('LPUSH', KEYS[2], newest)
  end
  local heir = handOff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs, micros, ARGV[5], ARGV[2])
  redis.pcall('SET', ARGV[3], '1', 'PX', math.max(left, tonumber(ARGV[4])))
  if heir then return {1, 1} end
  redis.call('DEL', KEYS[1])
  return {1, 0}
end
if redis.pcall('EXISTS', ARGV[3]) == 1 then return {2, 0} end
return {0, 0}
)lua";
}

}  // namespace dlock::detail
