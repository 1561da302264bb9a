// SPDX-License-Identifier: Apache-2.0
#include "ReadWriteScripts.h"

#include "Digest.h"
#include "FairScripts.h"

namespace dlock::detail {
namespace {

// On top of the fair queue's prelude (serverNow, stamp, placeEntry, nextFence, prune).
// keepFor: a key's TTL raised to `ms`, never lowered (PEXPIRE GT; a key without a TTL yet, which GT
// leaves so, or a server before 7.0, which refuses GT: PTTL, then PEXPIRE).
// holdersTtl: the longest remaining hold, what bounds a waiter's sleep.
// admit: the head of the queue goes on as far as its turn has come: a writer when nobody holds,
// or every reader at the head while no writer holds. `self`, the caller's place, gets its whole
// ttl and no message (its reply says it); anyone else a claim lease (its ttl, or the rest of its
// waiter lease if less) and a message on its process's channel. `vacating` ('w' or 'r') is the
// caller's hold that goes right after: admit runs first, so that a refused PUBLISH (an ACL) fails
// while the caller still holds (only ended holds and places are gone by then). The fence of a
// writer is raised before anything hands it over.
// Returns how many were admitted, and whether a writer was.
std::string readWritePrelude(const char* publish) {
  return fairQueuePrelude(publish) + R"lua(
local function keepFor(name, ms)
  if redis.pcall('PEXPIRE', name, ms, 'GT') ~= 1 and redis.call('PTTL', name) < ms then redis.call('PEXPIRE', name, ms) end
end
local function holdersTtl(nowMs)
  local left = math.max(0, redis.call('PTTL', KEYS[1]))
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if last[2] then left = math.max(left, tonumber(last[2]) - nowMs) end
  return left
end
local function admit(nowMs, micros, self, fenceTtl, channel, vacating)
  if vacating ~= 'w' and redis.call('EXISTS', KEYS[1]) == 1 then return 0, false end
  local admitted = 0
  local readFence = nil
  while true do
    local head = redis.call('LINDEX', KEYS[3], 0)
    if not head then return admitted, false end
    local expiry = redis.call('ZSCORE', KEYS[4], head)
    local mode, token, ttl, listener = string.match(head, '^([rw])([^|]*)|(%d+)%.?(%d*)$')
    if mode and (head == self or (expiry and tonumber(expiry) > nowMs)) then
      if mode == 'w' then
        local others = redis.call('ZCARD', KEYS[2])
        if vacating == 'r' then others = others - 1 end
        if others > 0 then return admitted, false end
      end
      local claim = tonumber(ttl)
      if head ~= self then claim = math.min(claim, tonumber(expiry) - nowMs) end
      local fence
      if mode == 'w' then
        fence = nextFence(KEYS[5], micros, fenceTtl)
      else
        readFence = readFence or redis.call('GET', KEYS[5]) or '0'
        fence = readFence
      end
      if head ~= self then
        local to = channel
        if listener ~= '' then to = channel .. ':' .. listener end
        redis.call(')lua" + std::string(publish) + R"lua(', to, token .. '|' .. fence .. '|' .. stamp(nowMs) .. '|' .. stamp(claim))
      end
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], head)
      admitted = admitted + 1
      if mode == 'w' then
        redis.call('SET', KEYS[1], token, 'PX', stamp(claim))
        return admitted, true
      end
      redis.call('ZADD', KEYS[2], stamp(nowMs + claim), token)
      keepFor(KEYS[2], claim)
    else
      redis.call('LPOP', KEYS[3])
      redis.call('ZREM', KEYS[4], head)
    end
  end
end
)lua";
}

// The uncontended path costs what the exclusive lock's acquire does: one EXISTS asks for the
// writer, the readers, the queue and the token's record at once (pcall: the record is not declared,
// and a node may refuse it during a migration; then the long way). Otherwise: a tombstone refuses;
// the token's own record of this mode goes (an earlier hold's release is no later hold's); ended
// readers are reclaimed; ours already answers the same; the writer's own read hold is taken at once
// (a downgrade's first step: no queued writer gets in between); a reader never queues for the write
// (it would wait for itself: tryUpgrade's part). Then the queue's turn (admit, perhaps the caller),
// the free case, and last the place: joined at the tail, or renewed where it is.
constexpr const char* kAcquireBody = R"lua(
local token, mode, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3])
local present = redis.pcall('EXISTS', KEYS[1], KEYS[2], KEYS[3], ARGV[7])
local nowMs, micros = serverNow()
local function take()
  if mode == 'w' then
    local fence = nextFence(KEYS[5], micros, ARGV[4])
    redis.call('SET', KEYS[1], token, 'PX', ARGV[3])
    return {1, fence, stamp(nowMs), 0}
  end
  if redis.call('ZADD', KEYS[2], stamp(nowMs + ttl), token) == 1 and present == 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  else
    keepFor(KEYS[2], ttl)
  end
  return {1, redis.call('GET', KEYS[5]) or '0', stamp(nowMs), 0}
end
if present == 0 then return take() end
local record = redis.pcall('GET', ARGV[7])
if record == '0' then return {0, 0, stamp(nowMs), 0} end
if record == mode then redis.pcall('DEL', ARGV[7]) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', stamp(nowMs))
local writer = redis.call('GET', KEYS[1])
local ends = redis.call('ZSCORE', KEYS[2], token)
if mode == 'w' and writer == token then
  return {1, redis.call('GET', KEYS[5]) or '0', stamp(nowMs), math.max(1, redis.call('PTTL', KEYS[1]))}
end
if mode == 'r' and ends then
  return {1, redis.call('GET', KEYS[5]) or '0', stamp(nowMs), math.max(1, tonumber(ends) - nowMs)}
end
if mode == 'r' and writer == token then return take() end
if mode == 'w' and ends then return {0, holdersTtl(nowMs), stamp(nowMs), 0} end
local place = mode .. placeEntry(token, ARGV[3], ARGV[8])
prune(KEYS[3], KEYS[4], nowMs, place)
admit(nowMs, micros, place, ARGV[4], ARGV[6], nil)
if (mode == 'w' and redis.call('GET', KEYS[1]) == token) or (mode == 'r' and redis.call('ZSCORE', KEYS[2], token)) then
  return {1, redis.call('GET', KEYS[5]) or '0', stamp(nowMs), 0}
end
if redis.call('EXISTS', KEYS[1], KEYS[3]) == 0 and (mode == 'r' or redis.call('EXISTS', KEYS[2]) == 0) then
  return take()
end
local lease = tonumber(ARGV[5])
if lease == 0 then return {0, holdersTtl(nowMs), stamp(nowMs), 0} end
local position = 0
if redis.call('ZADD', KEYS[4], stamp(nowMs + lease), place) == 1 then position = redis.call('RPUSH', KEYS[3], place) end
for _, name in ipairs({KEYS[3], KEYS[4]}) do
  if position == 1 then redis.call('PEXPIRE', name, lease) else keepFor(name, lease) end
end
if position == 0 then position = redis.call('LPOS', KEYS[3], place) + 1 end
return {0, holdersTtl(nowMs), stamp(nowMs), position}
)lua";

// The owner check first; the record (pcall, as the default release's: ReleaseSource.cpp) lives as
// long as the hold had left, at least the floor. With nobody queued that is all: the uncontended
// cycle costs the server no more calls than the exclusive lock's. Otherwise the queue's turn comes
// before the hold goes (admit's `vacating`), and a writer admitted in our place has overwritten
// the writer key already.
constexpr const char* kReleaseBody = R"lua(
local token, mode = ARGV[1], ARGV[2]
local nowMs, micros, left
if mode == 'w' then
  if redis.call('GET', KEYS[1]) ~= token then
    if redis.pcall('GET', ARGV[4]) == mode then return {2, 0} end
    return {0, 0}
  end
  left = redis.call('PTTL', KEYS[1])
else
  nowMs, micros = serverNow()
  local ends = redis.call('ZSCORE', KEYS[2], token)
  if not ends or tonumber(ends) <= nowMs then
    if redis.pcall('GET', ARGV[4]) == mode then return {2, 0} end
    return {0, 0}
  end
  left = tonumber(ends) - nowMs
end
local admitted, wrote = 0, false
if redis.call('EXISTS', KEYS[3]) == 1 then
  if not nowMs then nowMs, micros = serverNow() end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', stamp(nowMs))
  prune(KEYS[3], KEYS[4], nowMs, nil)
  admitted, wrote = admit(nowMs, micros, nil, ARGV[6], ARGV[3], mode)
end
redis.pcall('SET', ARGV[4], mode, 'PX', stamp(math.max(left, tonumber(ARGV[5]))))
if mode == 'r' then
  redis.call('ZREM', KEYS[2], token)
elseif not wrote then
  redis.call('DEL', KEYS[1])
end
return {1, admitted}
)lua";

// The read hold goes in before anything else, so admit counts it: a queued writer waits for it,
// readers at the head join it. A retry whose first try ran finds the read hold and no write.
constexpr const char* kDowngradeBody = R"lua(
local token, ttl = ARGV[1], tonumber(ARGV[2])
local nowMs, micros = serverNow()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', stamp(nowMs))
if redis.call('GET', KEYS[1]) ~= token then
  if redis.call('ZSCORE', KEYS[2], token) then return 1 end
  return 0
end
redis.call('ZADD', KEYS[2], stamp(nowMs + ttl), token)
keepFor(KEYS[2], ttl)
if redis.call('EXISTS', KEYS[3]) == 1 then
  prune(KEYS[3], KEYS[4], nowMs, nil)
  admit(nowMs, micros, nil, ARGV[4], ARGV[3], 'w')
end
redis.call('DEL', KEYS[1])
return 1
)lua";

// The sole live reader with no writer becomes the writer; ours already (a retry) answers the same.
constexpr const char* kUpgradeBody = R"lua(
local token = ARGV[1]
local nowMs, micros = serverNow()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', stamp(nowMs))
local writer = redis.call('GET', KEYS[1])
if writer == token then
  return {1, redis.call('GET', KEYS[5]) or '0', stamp(nowMs), math.max(1, redis.call('PTTL', KEYS[1]))}
end
if not writer and redis.call('ZCARD', KEYS[2]) == 1 and redis.call('ZSCORE', KEYS[2], token) then
  local fence = nextFence(KEYS[5], micros, ARGV[3])
  redis.call('DEL', KEYS[2])
  redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
  return {1, fence, stamp(nowMs), 0}
end
return {0, holdersTtl(nowMs), stamp(nowMs), 0}
)lua";

// Each hold renews its own token's hold of its own mode, never another's (Redisson's PR #7098);
// a read hold whose lease has ended is not revived.
constexpr const char* kExtendBody = R"lua(
local ms = tonumber(ARGV[1])
local nowMs = nil
local extended = {}
for i = 1, #KEYS / 2 do
  local writerKey, readersKey = KEYS[2 * i - 1], KEYS[2 * i]
  local token, mode = ARGV[2 * i], ARGV[2 * i + 1]
  extended[i] = 0
  if mode == 'w' then
    if redis.call('GET', writerKey) == token then extended[i] = redis.call('PEXPIRE', writerKey, ARGV[1]) end
  else
    nowMs = nowMs or serverNow()
    local ends = redis.call('ZSCORE', readersKey, token)
    if ends and tonumber(ends) > nowMs then
      redis.call('ZADD', readersKey, 'XX', stamp(nowMs + ms), token)
      keepFor(readersKey, ms)
      extended[i] = 1
    end
  end
end
return extended
)lua";

// As the fair lock's leave (FairScripts.cpp): a tombstone first, out of the queue, and a hold
// granted to the token meanwhile is passed on. The tombstone overwrites a release record: the
// token is never used again, and an attempt of it still on its way must find the tombstone.
constexpr const char* kLeaveBody = R"lua(
local token, mode = ARGV[1], ARGV[2]
redis.pcall('SET', ARGV[5], '0', 'PX', ARGV[6])
local place = mode .. placeEntry(token, ARGV[3], ARGV[7])
redis.call('LREM', KEYS[3], 1, place)
redis.call('ZREM', KEYS[4], place)
local nowMs, micros = serverNow()
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', stamp(nowMs))
local held
if mode == 'w' then held = redis.call('GET', KEYS[1]) == token else held = redis.call('ZSCORE', KEYS[2], token) ~= false end
local vacating = nil
if held then vacating = mode end
prune(KEYS[3], KEYS[4], nowMs, nil)
local _, wrote = admit(nowMs, micros, nil, ARGV[8], ARGV[4], vacating)
if not held then return 0 end
if mode == 'r' then
  redis.call('ZREM', KEYS[2], token)
elseif not wrote then
  redis.call('DEL', KEYS[1])
end
return 1
)lua";

// Read-only: live readers and live places only, as every decision would see them.
constexpr const char* kInspectBody = R"lua(
local nowMs = serverNow()
local readers = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. stamp(nowMs), '+inf', 'WITHSCORES')
local places = {}
for _, place in ipairs(redis.call('LRANGE', KEYS[3], 0, -1)) do
  local expiry = redis.call('ZSCORE', KEYS[4], place)
  if expiry and tonumber(expiry) > nowMs then places[#places + 1] = place end
end
return {stamp(nowMs), redis.call('GET', KEYS[1]) or '', redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[5]) or '0',
        readers, places}
)lua";

// Made while the library loads (namespace scope, no function-local statics): a child forked while a
// parent thread made one would otherwise wait for ever on its initialisation guard.
const Script kAcquire = makeBoundScript("readWriteAcquire", readWritePrelude("PUBLISH") + kAcquireBody);
const Script kShardedAcquire = makeBoundScript("shardedReadWriteAcquire", readWritePrelude("SPUBLISH") + kAcquireBody);
const Script kRelease = makeScript("readWriteRelease", readWritePrelude("PUBLISH") + kReleaseBody);
const Script kShardedRelease = makeScript("shardedReadWriteRelease", readWritePrelude("SPUBLISH") + kReleaseBody);
const Script kDowngrade = makeBoundScript("readWriteDowngrade", readWritePrelude("PUBLISH") + kDowngradeBody);
const Script kShardedDowngrade = makeBoundScript("shardedReadWriteDowngrade", readWritePrelude("SPUBLISH") + kDowngradeBody);
const Script kUpgrade = makeBoundScript("readWriteUpgrade", readWritePrelude("PUBLISH") + kUpgradeBody);
const Script kExtend = makeBoundScript("readWriteExtend", readWritePrelude("PUBLISH") + kExtendBody);
const Script kLeave = makeScript("readWriteLeave", readWritePrelude("PUBLISH") + kLeaveBody);
const Script kShardedLeave = makeScript("shardedReadWriteLeave", readWritePrelude("SPUBLISH") + kLeaveBody);
const Script kInspect = makeScript("readWriteInspect", readWritePrelude("PUBLISH") + kInspectBody);

}  // namespace

const Script& readWriteAcquireScript(bool sharded) { return sharded ? kShardedAcquire : kAcquire; }
const Script& readWriteReleaseScript(bool sharded) { return sharded ? kShardedRelease : kRelease; }
const Script& readWriteDowngradeScript(bool sharded) { return sharded ? kShardedDowngrade : kDowngrade; }
const Script& readWriteUpgradeScript() { return kUpgrade; }
const Script& readWriteExtendScript() { return kExtend; }
const Script& readWriteLeaveScript(bool sharded) { return sharded ? kShardedLeave : kLeave; }
const Script& readWriteInspectScript() { return kInspect; }

}  // namespace dlock::detail
