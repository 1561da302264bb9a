// SPDX-License-Identifier: Apache-2.0
#include "FairScripts.h"

#include "Digest.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {
namespace {

const char* publishOf(bool sharded) { return sharded ? "SPUBLISH" : "PUBLISH"; }

// Admits the caller: free and nobody ahead → taken; someone else heads the queue of a free key
// (its holder's lease ran out unreleased) → handed to that waiter now, and the caller queues.
// A place is joined at the tail when ZADD adds its lease (renewing one keeps it where it is). The
// queue's keys live as long as the longest waiter lease: PEXPIRE GT raises a TTL and never
// lowers one, in one call. A queue this attempt created (its first entry) has no TTL yet, which
// GT would leave so: a plain PEXPIRE. A server before Redis 7.0 refuses GT: PTTL, then PEXPIRE.
// Every call costs the server microseconds, and the holder's next attempt to queue runs just as
// the key is handed on.
constexpr const char* kAcquireBody = R"lua(
local nowMs, micros = serverNow()
if redis.pcall('GET', ARGV[6]) == '0' then return {0, 0, stamp(nowMs), 0} end
local token = ARGV[1]
local entry = placeEntry(token, ARGV[2], ARGV[7])
local owner = redis.call('GET', KEYS[1])
if owner == token then
  return {1, redis.call('GET', KEYS[4]) or '0', stamp(nowMs), math.max(1, redis.call('PTTL', KEYS[1]))}
end
prune(KEYS[2], KEYS[3], nowMs, entry)
if not owner then
  local head = redis.call('LINDEX', KEYS[2], 0)
  if not head or head == entry then
    local fence = nextFence(KEYS[4], micros, ARGV[3])
    if head then
      redis.call('LPOP', KEYS[2])
      redis.call('ZREM', KEYS[3], entry)
    end
    redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
    return {1, fence, stamp(nowMs), 0}
  end
  handOff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs, micros, ARGV[3], ARGV[5])
end
local lease = tonumber(ARGV[4])
if lease == 0 then return {0, redis.call('PTTL', KEYS[1]), stamp(nowMs), 0} end
local queued = 0
if redis.call('ZADD', KEYS[3], stamp(nowMs + lease), entry) == 1 then queued = redis.call('RPUSH', KEYS[2], entry) end
for _, name in ipairs({KEYS[2], KEYS[3]}) do
  if queued == 1 then
    redis.call('PEXPIRE', name, lease)
  elseif type(redis.pcall('PEXPIRE', name, lease, 'GT')) == 'table' then
    if redis.call('PTTL', name) < lease then redis.call('PEXPIRE', name, lease) end
  end
end
if queued == 0 then queued = redis.call('LPOS', KEYS[2], entry) + 1 end  -- RPUSH's reply: the tail's place
return {0, redis.call('PTTL', KEYS[1]), stamp(nowMs), queued}
)lua";

// A waiter that gives up: out of the queue. If the key is ours (a hand-off raced the timeout),
// or free with waiters (its holder's lease ran out), it goes to the next waiter now. It leaves a
// tombstone for the token (its release record set to '0', unless a release wrote one), which the
// acquire refuses: an attempt of this token still on its way to a busy server, arriving after the
// leave, can neither queue it again nor take the key for a waiter that is gone.
constexpr const char* kLeaveBody = R"lua(
redis.pcall('SET', ARGV[5], '0', 'PX', ARGV[6], 'NX')
local entry = placeEntry(ARGV[1], ARGV[2], ARGV[7])
redis.call('LREM', KEYS[2], 1, entry)
redis.call('ZREM', KEYS[3], entry)
local owner = redis.call('GET', KEYS[1])
if owner and owner ~= ARGV[1] then return 0 end
local nowMs, micros = serverNow()
prune(KEYS[2], KEYS[3], nowMs, nil)
local heir = handOff(KEYS[1], KEYS[2], KEYS[3], KEYS[4], nowMs, micros, ARGV[3], ARGV[4])
if owner and not heir then redis.call('DEL', KEYS[1]) end
if owner then return 1 end
return 0
)lua";

}  // namespace

std::string fairQueuePrelude(const char* publish) {
  // Server time as ms (exact in a double) and as µs text (the fence floor, as the acquire script).
  // The fence is raised exactly as the default acquire raises it: INCR (its reply exact below
  // 2^53, read back as text above), then the clock floor compared as text of digits, exact in 64
  // bits; fence before any write that hands the key over, so a refusal (overflow, ACL) leaves the
  // queue and the lock as they were.
  // A place is `token|ttl.listener`: the listener (digits, one per client process, starting with
  // 0) names the channel of that waiter's hand-off, `channel:listener`, so only the heir's process
  // hears it, not every waiter's. It rides in the ttl field as a fraction below 0.1, which a 0.2
  // script reads as the ttl, rounded down: it still hands the key on, on the key's channel, which
  // this waiter does not hear (its next recheck finds the hand-off). A 0.2 waiter's place has no
  // listener and gets the key's channel.
  // handOff: the heir owns the key for a claim lease, its ttl or what is left of its waiter lease
  // if less (a waiter that died just before its turn then holds the key no longer than its place
  // would have lasted); a live heir extends it to its ttl at once. PUBLISH first, for the same
  // reason (a refused publish changes nothing); subscribers get the message only after the whole
  // script has run, when the waiter owns the key.
  return std::string(R"lua(
local function serverNow()
  local t = boundClock or redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t[1] .. string.format('%06d', tonumber(t[2]))
end
local function stamp(ms) return string.format('%.0f', ms) end
local function placeEntry(token, ttl, listener)
  if listener and listener ~= '' then return token .. '|' .. ttl .. '.' .. listener end
  return token .. '|' .. ttl
end
local function nextFence(fenceKey, micros, fenceTtl)
  local counted = redis.call('INCR', fenceKey)
  local fence
  if counted < 9007199254740992 then fence = string.format('%d', counted) else fence = redis.call('GET', fenceKey) end
  if #micros > #fence or (#micros == #fence and micros > fence) then fence = micros end
  redis.call('SET', fenceKey, fence, 'PX', fenceTtl)
  return fence
end
local function prune(queue, leases, nowMs, keep)
  for _, entry in ipairs(redis.call('ZRANGEBYSCORE', leases, '-inf', stamp(nowMs))) do
    if entry ~= keep then
      redis.call('ZREM', leases, entry)
      redis.call('LREM', queue, 1, entry)
    end
  end
end
local function handOff(lock, queue, leases, fenceKey, nowMs, micros, fenceTtl, channel)
  while true do
    local head = redis.call('LINDEX', queue, 0)
    if not head then return nil end
    local expiry = redis.call('ZSCORE', leases, head)
    local token, ttl, listener = string.match(head, '^([^|]*)|(%d+)%.?(%d*)$')
    if expiry and token and tonumber(expiry) > nowMs then
      local claim = stamp(math.min(tonumber(ttl), tonumber(expiry) - nowMs))
      local fence = nextFence(fenceKey, micros, fenceTtl)
      if listener ~= '' then channel = channel .. ':' .. listener end
      redis.call(')lua") + publish + R"lua(', channel, token .. '|' .. fence .. '|' .. stamp(nowMs) .. '|' .. claim)
      redis.call('LPOP', queue)
      redis.call('ZREM', leases, head)
      redis.call('SET', lock, token, 'PX', claim)
      return token
    end
    redis.call('LPOP', queue)
    redis.call('ZREM', leases, head)
  end
end
)lua";
}

const Script& fairAcquireScript(bool sharded) {
  static const Script plain = makeBoundScript("fairAcquire", fairQueuePrelude(publishOf(false)) + kAcquireBody);
  static const Script cluster = makeBoundScript("shardedFairAcquire", fairQueuePrelude(publishOf(true)) + kAcquireBody);
  return sharded ? cluster : plain;
}

const Script& fairReleaseScript(bool sharded) {
  static const Script plain = makeScript("fairRelease", fairQueuePrelude(publishOf(false)) + fairReleaseBody());
  static const Script cluster = makeScript("shardedFairRelease", fairQueuePrelude(publishOf(true)) + fairReleaseBody());
  return sharded ? cluster : plain;
}

const Script& fairLeaveScript(bool sharded) {
  static const Script plain = makeScript("fairLeave", fairQueuePrelude(publishOf(false)) + kLeaveBody);
  static const Script cluster = makeScript("shardedFairLeave", fairQueuePrelude(publishOf(true)) + kLeaveBody);
  return sharded ? cluster : plain;
}

namespace {

// Made while the library loads, as the other scripts are (Scripts.cpp).
const MadeAtLoad kFairScriptsMadeAtLoad([] {
  for (const bool sharded : {false, true}) {
    (void)fairAcquireScript(sharded);
    (void)fairReleaseScript(sharded);
    (void)fairLeaveScript(sharded);
  }
});

}  // namespace

}  // namespace dlock::detail
