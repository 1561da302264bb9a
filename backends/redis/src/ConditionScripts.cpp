// SPDX-License-Identifier: Apache-2.0
#include "ConditionScripts.h"

#include "Digest.h"
#include "FairScripts.h"
#include "ScriptSources.h"

namespace dlock::detail {
namespace {

// On top of the fair queue's prelude (serverNow, stamp, placeEntry, prune, handOff): keepFor, a
// key's TTL raised to `ms` and never lowered (PEXPIRE GT; a key without a TTL yet, which GT leaves
// so, or a server before 7.0, which refuses GT: PTTL, then PEXPIRE). keepBothFor: a list and its
// leases kept so; a plain PEXPIRE when a first place just created them (each call costs the server).
std::string conditionPrelude(const char* publish) {
  return fairQueuePrelude(publish) + R"lua(
local function keepFor(name, ms)
  if redis.pcall('PEXPIRE', name, ms, 'GT') ~= 1 and redis.call('PTTL', name) < ms then redis.call('PEXPIRE', name, ms) end
end
local function keepBothFor(list, leases, ms, created)
  for _, name in ipairs({list, leases}) do
    if created then redis.call('PEXPIRE', name, ms) else keepFor(name, ms) end
  end
end
)lua";
}

// After the lock's release, run as `release()`: a waiter already on the condition is a retry whose
// first try ran (asked first, as the key is no longer ours then). On a fair key, so is a token
// holding the key under a later fence than the caller's (ARGV[9]): signalled and handed the key
// since, a hold the retry must not release (a signal would be lost). A counter gone (its TTL) or
// raised by hand cannot tell: the first costs nothing, the second a spurious wake-up. The release goes before the
// join: a script is not rolled back, and what can refuse (a PUBLISH the ACL forbids) must refuse
// before the token waits on a key it still holds. Ended places are dropped before the join, so a
// place of this token that ran out is not listed twice.
constexpr const char* kAwaitTail = R"lua(
local waiters, leases = KEYS[#KEYS - 1], KEYS[#KEYS]
local ttl, listener, waiterLease = ARGV[own], ARGV[own + 1], ARGV[own + 2]
local entry = placeEntry(ARGV[1], ttl, listener)
local nowMs = serverNow()
local expiry = redis.call('ZSCORE', leases, entry)
if expiry and tonumber(expiry) > nowMs then return {2, 0, (redis.call('LPOS', waiters, entry) or -1) + 1} end
if fair then
  local counter = redis.call('GET', KEYS[4])
  if counter and counter ~= ARGV[9] and redis.call('GET', KEYS[1]) == ARGV[1] then return {2, 0, 0} end
end
local released = release()
if released[1] == 2 then return {2, 0, 0} end
if released[1] ~= 1 then return {0, 0, 0} end
if fair then redis.pcall('DEL', ARGV[3]) end
prune(waiters, leases, nowMs, nil)
local lease = tonumber(waiterLease)
redis.call('ZADD', leases, stamp(nowMs + lease), entry)
local position = redis.call('RPUSH', waiters, entry)
keepBothFor(waiters, leases, lease, position == 1)
return {1, released[2], position}
)lua";

// `own`: where the await's own arguments (the claim lease, the listener, the waiter lease) begin,
// after the release's: the fair release reads ARGV[1..5], the exclusive one ARGV[1..6] (its waiter
// registry in ARGV[6]) and its owner record last.
std::string awaitSource(bool fair, const char* publish) {
  return conditionPrelude(publish) + "local fair = " + (fair ? "true" : "false") + "\nlocal own = " +
         (fair ? "6" : "7") + "\nlocal function release()\n" + (fair ? fairReleaseBody() : releaseSource(publish)) +
         "end\n" + kAwaitTail;
}

// Each moved waiter is told (or queued) before its place goes: a refused PUBLISH stops the script
// with every waiter moved so far told, and the rest still waiting.
constexpr const char* kSignalBody = R"lua(
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, 0} end
local nowMs = serverNow()
local moved = 0
while ARGV[2] == 'all' or moved == 0 do
  local head = redis.call('LINDEX', KEYS[2], 0)
  if not head then break end
  local expiry = redis.call('ZSCORE', KEYS[3], head)
  local token, ttl, listener = string.match(head, '^([^|]*)|(%d+)%.?(%d*)$')
  if expiry and token and tonumber(expiry) > nowMs then
    if ARGV[3] == 'fair' then
      local queued = 0
      if redis.call('ZADD', KEYS[5], 'NX', expiry, head) == 1 then queued = redis.call('RPUSH', KEYS[4], head) end
      keepBothFor(KEYS[4], KEYS[5], tonumber(expiry) - nowMs, queued == 1)
    else
      local channel = ARGV[4]
      if listener ~= '' then channel = channel .. ':' .. listener end
      redis.call(PUBLISH, channel, token .. '|0|' .. stamp(nowMs) .. '|0')
    end
    moved = moved + 1
  end
  redis.call('LPOP', KEYS[2])
  redis.call('ZREM', KEYS[3], head)
end
return {1, moved}
)lua";

std::string signalSource(const char* publish) {
  std::string body = kSignalBody;
  const std::string marker = "redis.call(PUBLISH,";
  body.replace(body.find(marker), marker.size(), std::string("redis.call('") + publish + "',");
  return conditionPrelude(publish) + body;
}

// A place that ran out is no waiter: dropped, and its renewal says so.
constexpr const char* kRenewBody = R"lua(
local nowMs = serverNow()
local lease = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS / 2 do
  local waiters, leases = KEYS[2 * i - 1], KEYS[2 * i]
  local entry = placeEntry(ARGV[2 * i + 1], ARGV[2 * i + 2], ARGV[2])
  local expiry = redis.call('ZSCORE', leases, entry)
  renewed[i] = 0
  if expiry and tonumber(expiry) > nowMs then
    redis.call('ZADD', leases, 'XX', stamp(nowMs + lease), entry)
    keepBothFor(waiters, leases, lease, false)
    renewed[i] = 1
  elseif expiry then
    redis.call('ZREM', leases, entry)
    redis.call('LREM', waiters, 1, entry)
  end
end
return renewed
)lua";

constexpr const char* kLeaveBody = R"lua(
local entry = placeEntry(ARGV[1], ARGV[2], ARGV[3])
local expiry = redis.call('ZSCORE', KEYS[2], entry)
redis.call('ZREM', KEYS[2], entry)
redis.call('LREM', KEYS[1], 1, entry)
if expiry and tonumber(expiry) > serverNow() then return 1 end
return 0
)lua";

constexpr const char* kInspectBody = R"lua(
local nowMs = serverNow()
local out = {stamp(nowMs)}
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local expiry = redis.call('ZSCORE', KEYS[2], entry)
  if expiry and tonumber(expiry) > nowMs then
    table.insert(out, entry)
    table.insert(out, stamp(tonumber(expiry)))
  end
end
return out
)lua";

// Made while the library loads, as the other scripts are: no one-time guard a forked child could
// find held.
const Script kAwait[2][2] = {
    {makeBoundScript("condAwait", awaitSource(false, "PUBLISH")), makeBoundScript("shardedCondAwait", awaitSource(false, "SPUBLISH"))},
    {makeBoundScript("condAwaitFair", awaitSource(true, "PUBLISH")),
     makeBoundScript("shardedCondAwaitFair", awaitSource(true, "SPUBLISH"))}};
const Script kSignal[2] = {makeBoundScript("condSignal", signalSource("PUBLISH")),
                           makeBoundScript("shardedCondSignal", signalSource("SPUBLISH"))};
const Script kRenew = makeBoundScript("condRenew", conditionPrelude("PUBLISH") + kRenewBody);
const Script kLeave = makeScript("condLeave", conditionPrelude("PUBLISH") + kLeaveBody);
const Script kInspect = makeScript("condInspect", conditionPrelude("PUBLISH") + kInspectBody);

}  // namespace

const Script& conditionAwaitScript(bool fair, bool sharded) { return kAwait[fair ? 1 : 0][sharded ? 1 : 0]; }
const Script& conditionSignalScript(bool sharded) { return kSignal[sharded ? 1 : 0]; }
const Script& conditionRenewScript() { return kRenew; }
const Script& conditionLeaveScript() { return kLeave; }
const Script& conditionInspectScript() { return kInspect; }

}  // namespace dlock::detail
