// SPDX-License-Identifier: Apache-2.0
#include "SemaphoreScripts.h"

#include "Digest.h"

namespace dlock::detail {
namespace {

// The semaphore as one call sees it (`s`), written back once by finish(). Why it is shaped so:
// - Server calls cost the server microseconds each, and a new primitive may make no more per
//   uncontended cycle than the exclusive lock: an uncontended acquire or release is TIME, one
//   HMGET (every count, the '#next' and '#expires' stamps and the caller's state), one ZADD and
//   one HSET. '#next' (never later than the earliest deadline) is what lets a call skip the
//   reclaim's ZRANGEBYSCORE when nothing is due; '#expires' is what lets it skip the PEXPIREs.
// - Counts are kept in Lua and written after the deadlines: a write refused midway (OOM) can
//   leave permits counted as used, never free ones that are held (too few admitted, never too many).
// - Fencing tokens as the lock's: max(last + 1, server TIME in µs), exact below 2^53 in Lua's
//   doubles; above it HINCRBY counts in 64 bits (and refuses 2^63 - 1) before anything is written.
// - The queue holds only live waiters: a reclaimed or leaving place is taken out at once, so a
//   waiter's position counts live places and '#waiting' is the queue's length.
// - A state is one field, so a token is in one state at a time: a release turns a hold into its
//   record, a leave anything else into a tombstone; reclaiming a hold frees exactly its permits.
constexpr const char* kPrelude = R"lua(
local H, Z, Q = KEYS[1], KEYS[2], KEYS[3]
local kChunk = 1000
local function serverNow()
  local t = boundClock or redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), t[1] .. string.format('%06d', tonumber(t[2]))
end
local function stamp(ms) return string.format('%.0f', ms) end
local function parse(state)
  if not state then return nil end
  local kind = string.sub(state, 1, 1)
  if kind == 'h' then
    local permits, fence = string.match(state, '^h|(%d+)|(%d+)$')
    return kind, tonumber(permits), fence
  elseif kind == 'w' then
    local permits, lease, listener = string.match(state, '^w|(%d+)|(%d+)|(%d*)$')
    return kind, tonumber(permits), tonumber(lease), listener
  end
  return kind
end
local function chunked(command, key, list)
  for i = 1, #list, kChunk do
    redis.call(command, key, unpack(list, i, math.min(#list, i + kChunk - 1)))
  end
end
local function stateOf(s, token)
  if s.states[token] ~= nil then return s.states[token] end
  if token == s.token then return s.mine end
  return redis.call('HGET', H, token)
end
local function deadlineOf(s, token)
  return s.deadlines[token] or tonumber(redis.call('ZSCORE', Z, token))
end
local function setDeadline(s, token, at)
  if not s.deadlines[token] then s.order[#s.order + 1] = token end
  s.deadlines[token] = at
  if s.latest < at then s.latest = at end
  if not s.next or at < s.next then s.next = at; s.dirty = true end
end
local function setState(s, token, state, at)
  s.states[token] = state
  s.dirty = true
  setDeadline(s, token, at)
end
-- Everything due by now goes (a thousand a call at most: what is left stays counted as used, and
-- the next call goes on), but the place of `keep`, which renews it in this call.
local function reclaim(s, keep)
  local due = redis.call('ZRANGEBYSCORE', Z, '-inf', stamp(s.nowMs), 'LIMIT', 0, kChunk)
  if #due > 0 then
    local states = redis.call('HMGET', H, unpack(due))
    local gone = {}
    for i, token in ipairs(due) do
      local kind, permits = parse(states[i])
      if not (kind == 'w' and token == keep) then
        if kind == 'h' then
          s.used = s.used - permits
        elseif kind == 'w' then
          redis.call('LREM', Q, 1, token)
          s.waiting = s.waiting - 1
        end
        if token == keep then s.mine = false end
        gone[#gone + 1] = token
      end
    end
    if #gone > 0 then
      redis.call('ZREM', Z, unpack(gone))
      redis.call('HDEL', H, unpack(gone))
      s.admit = true
    end
  end
  local first = redis.call('ZRANGE', Z, 0, 0, 'WITHSCORES')
  s.next = tonumber(first[2])
  s.dirty = true
end
-- The semaphore for this call, reclaimed; `token`'s state (if any) read with its counts.
local function load(token, keyLife, channel)
  local nowMs, micros = serverNow()
  local fields = {'#capacity', '#used', '#fence', '#waiting', '#next', '#expires'}
  if token then fields[7] = token end
  local m = redis.call('HMGET', H, unpack(fields))
  local s = {cap = tonumber(m[1]), used = tonumber(m[2]) or 0, fence = m[3] or '0', waiting = tonumber(m[4]) or 0,
             next = tonumber(m[5]), expires = tonumber(m[6]) or 0, token = token, mine = m[7], nowMs = nowMs,
             micros = micros, keyLife = tonumber(keyLife), channel = channel, states = {}, deadlines = {}, order = {},
             latest = 0, dirty = false, admit = false, newQueue = false}
  if s.next and s.next <= nowMs then reclaim(s, token) end
  s.empty = not s.next  -- the deadlines' key is gone: a ZADD makes it anew, without a TTL
  return s
end
local function free(s, permits)
  s.used = s.used - permits
  s.admit = true
end
local function nextFence(s)
  local last = tonumber(s.fence)
  if last < 9007199254740000 then
    s.fence = string.format('%d', math.max(last + 1, tonumber(s.micros)))
  else
    redis.call('HSET', H, '#fence', s.fence)
    redis.call('HINCRBY', H, '#fence', 1)
    s.fence = redis.call('HGET', H, '#fence')
  end
  s.dirty = true
  return s.fence
end
-- Admits head waiters while they fit, in order: a small request never passes a large one at the
-- head. `keep` is the caller, admitted in its own call for its whole lease and told by the reply.
local function admit(s, keep, keepLease)
  local admitted = 0
  while s.admit and s.cap and s.waiting > 0 do
    local head = redis.call('LINDEX', Q, 0)
    if not head then s.waiting = 0; s.dirty = true; break end
    local kind, permits, lease, listener = parse(stateOf(s, head))
    if kind == 'w' then
      if s.used + permits > s.cap then break end
      local claim = keepLease
      if head ~= keep then claim = math.min(lease, deadlineOf(s, head) - s.nowMs) end
      local fence = nextFence(s)
      if head ~= keep then
        local message = head .. '|' .. fence .. '|' .. stamp(s.nowMs) .. '|' .. stamp(claim)
        redis.call(PUBLISH, s.channel .. ':' .. listener, message)
      end
      s.used = s.used + permits
      setState(s, head, 'h|' .. permits .. '|' .. fence, s.nowMs + claim)
      admitted = admitted + 1
    end
    redis.call('LPOP', Q)
    s.waiting = s.waiting - 1
    s.dirty = true
  end
  s.admit = false
  return admitted
end
-- Writes what changed; a call that changed nothing makes no key.
local function finish(s, reply)
  local refresh = (s.dirty or #s.order > 0) and s.expires < math.max(s.latest, s.nowMs + s.keyLife / 2)
  if refresh then
    s.expires = math.max(s.latest, s.nowMs + s.keyLife)
    s.dirty = true
  end
  if #s.order > 0 then
    local scored = {}
    for _, token in ipairs(s.order) do
      scored[#scored + 1] = stamp(s.deadlines[token])
      scored[#scored + 1] = token
    end
    chunked('ZADD', Z, scored)
    if s.empty and not refresh then redis.call('PEXPIREAT', Z, stamp(s.expires)) end
  end
  if s.dirty then
    local fields = {'#used', s.used, '#fence', s.fence, '#waiting', s.waiting, '#expires', stamp(s.expires),
                    '#next', s.next and stamp(s.next) or ''}
    if s.cap then fields[#fields + 1] = '#capacity'; fields[#fields + 1] = s.cap end
    for token, state in pairs(s.states) do
      fields[#fields + 1] = token
      fields[#fields + 1] = state
    end
    chunked('HSET', H, fields)
  end
  if refresh then
    for _, key in ipairs({H, Z, Q}) do redis.call('PEXPIREAT', key, stamp(s.expires)) end
  elseif s.newQueue then
    redis.call('PEXPIREAT', Q, stamp(s.expires))
  end
  return reply
end
)lua";

// A token spent (released, left) is refused: an attempt still on its way to a busy server after
// the release or the leave must not take permits nobody will release. Ours already answers the
// same grant, so a retried acquire (its reply lost) settles it. A waiter's own call checks the
// head again, so a queue is never left stuck by a missed admission.
constexpr const char* kAcquireBody = R"lua(
local token, permits, capacity = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local lease, waiterLease = tonumber(ARGV[4]), tonumber(ARGV[5])
local s = load(token, ARGV[8], ARGV[6])
local nowMs = s.nowMs
if parse(s.mine) == 'w' then s.admit = true end
admit(s, token, lease)
local kind, held, fence = parse(stateOf(s, token))
if kind == 'r' or kind == 't' then return finish(s, {2, 0, stamp(nowMs), 0}) end
if kind == 'h' then return finish(s, {1, fence, stamp(nowMs), math.max(1, deadlineOf(s, token) - nowMs)}) end
if not s.cap then s.cap = capacity; s.dirty = true end
if s.cap ~= capacity then return finish(s, {3, stamp(s.cap), stamp(nowMs), 0}) end
local function nextExpiry() if s.next then return math.max(1, s.next - nowMs) end return 0 end
if kind ~= 'w' then
  if s.waiting == 0 and s.used + permits <= s.cap then
    fence = nextFence(s)
    s.used = s.used + permits
    setState(s, token, 'h|' .. permits .. '|' .. fence, nowMs + lease)
    return finish(s, {1, fence, stamp(nowMs), 0})
  end
  if waiterLease == 0 then return finish(s, {0, nextExpiry(), stamp(nowMs), 0}) end
  local position = redis.call('RPUSH', Q, token)
  s.newQueue = position == 1
  s.waiting = s.waiting + 1
  setState(s, token, 'w|' .. permits .. '|' .. lease .. '|' .. ARGV[7], nowMs + waiterLease)
  return finish(s, {0, nextExpiry(), stamp(nowMs), position})
end
if waiterLease > 0 then setDeadline(s, token, nowMs + waiterLease) end
return finish(s, {0, nextExpiry(), stamp(nowMs), (redis.call('LPOS', Q, token) or -1) + 1})
)lua";

// The record outlives every try of this call (record-ms: the client's command timeout and retry
// budget), so a retry whose first try ran is told so; none means not released by us.
constexpr const char* kReleaseBody = R"lua(
local token = ARGV[1]
local s = load(token, ARGV[4], ARGV[2])
local kind, held = parse(s.mine)
if kind == 'h' then
  free(s, held)
  setState(s, token, 'r', s.nowMs + tonumber(ARGV[3]))
  return finish(s, {1, admit(s)})
end
admit(s)
if kind == 'r' then return finish(s, {2, 0}) end
return finish(s, {0, 0})
)lua";

// Renews the token's own hold only; a lease that ended was reclaimed by load(), so it answers 0.
// Shared by semExtend and semExtendMany.
constexpr const char* kExtendOne = R"lua(
local function extendOne(token, leaseMs, keyLife, channel)
  local s = load(token, keyLife, channel)
  admit(s)
  if parse(s.mine) ~= 'h' then return finish(s, 0) end
  setDeadline(s, token, s.nowMs + tonumber(leaseMs))
  return finish(s, 1)
end
)lua";

constexpr const char* kExtendBody = R"lua(
return extendOne(ARGV[1], ARGV[2], ARGV[4], ARGV[3])
)lua";

// The watchdog's batch: each lease as semExtend does it, in order, on its name's three keys
// (H, Z and Q, the prelude's, are pointed at them in turn: every function of the prelude reads
// them). A name's leases see the state its earlier ones wrote.
constexpr const char* kExtendManyBody = R"lua(
local leaseMs, keyLife, names = ARGV[1], ARGV[2], tonumber(ARGV[3])
local extended = {}
for i = 4 + names, #ARGV, 2 do
  local n = tonumber(ARGV[i])
  H, Z, Q = KEYS[3 * n - 2], KEYS[3 * n - 1], KEYS[3 * n]
  extended[#extended + 1] = extendOne(ARGV[i + 1], leaseMs, keyLife, ARGV[3 + n])
end
return extended
)lua";

// As the fair lock's leave: out of the queue, a grant that raced it released (handed on), and a
// tombstone (unless a release wrote its record) that refuses an attempt of this token still on
// its way to a busy server.
constexpr const char* kLeaveBody = R"lua(
local token = ARGV[1]
local s = load(token, ARGV[4], ARGV[2])
local kind, held = parse(s.mine)
local released = 0
if kind == 'w' then
  redis.call('LREM', Q, 1, token)
  s.waiting = s.waiting - 1
  s.admit = true
elseif kind == 'h' then
  free(s, held)
  released = 1
end
if kind ~= 'r' and kind ~= 't' then setState(s, token, 't', s.nowMs + tonumber(ARGV[3])) end
admit(s)
return finish(s, released)
)lua";

// Holders keep their permits (a smaller capacity admits nobody until enough are released).
constexpr const char* kResizeBody = R"lua(
local s = load(nil, ARGV[3], ARGV[2])
local capacity = tonumber(ARGV[1])
if s.cap ~= capacity then
  s.cap = capacity
  s.dirty = true
  s.admit = true
end
return finish(s, admit(s))
)lua";

// Read only: what is due by now counts as gone, as the next writing call would reclaim it.
constexpr const char* kInspectSource = R"lua(
local H, Z, Q = KEYS[1], KEYS[2], KEYS[3]
local t = redis.call('TIME')
local nowMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now = string.format('%.0f', nowMs)
local live = redis.call('ZRANGEBYSCORE', Z, '(' .. now, '+inf', 'WITHSCORES')
local holders, waiting = {}, {}
for i = 1, #live, 2 do
  local token = live[i]
  local state = redis.call('HGET', H, token)
  if state then
    local permits, fence = string.match(state, '^h|(%d+)|(%d+)$')
    if permits then
      holders[#holders + 1] = {token, tonumber(permits), tonumber(live[i + 1]) - nowMs, fence}
    else
      permits = string.match(state, '^w|(%d+)|')
      if permits then waiting[token] = tonumber(permits) end
    end
  end
end
local waiters = {}
for _, token in ipairs(redis.call('LRANGE', Q, 0, -1)) do
  if waiting[token] then waiters[#waiters + 1] = {token, waiting[token]} end
end
return {redis.call('HGET', H, '#capacity') or '0', now, holders, waiters}
)lua";

std::string source(const char* publish, const char* body, const char* functions) {
  return std::string("local PUBLISH = '") + publish + "'\n" + kPrelude + functions + body;
}

Script pair(const char* name, bool sharded, const char* body, const char* functions = "") {
  return makeScript(name, source(sharded ? "SPUBLISH" : "PUBLISH", body, functions));
}

// A pair whose scripts refuse a late call (makeBoundScript).
Script boundPair(const char* name, bool sharded, const char* body, const char* functions = "") {
  return makeBoundScript(name, source(sharded ? "SPUBLISH" : "PUBLISH", body, functions));
}

// Made while the library loads (namespace scope, no function-local statics): a child forked while
// a parent thread made one would otherwise wait for ever on its initialisation guard.
const Script kAcquire[2] = {boundPair("semAcquire", false, kAcquireBody), boundPair("shardedSemAcquire", true, kAcquireBody)};
const Script kRelease[2] = {pair("semRelease", false, kReleaseBody), pair("shardedSemRelease", true, kReleaseBody)};
const Script kExtend[2] = {boundPair("semExtend", false, kExtendBody, kExtendOne),
                           boundPair("shardedSemExtend", true, kExtendBody, kExtendOne)};
const Script kExtendMany[2] = {boundPair("semExtendMany", false, kExtendManyBody, kExtendOne),
                               boundPair("shardedSemExtendMany", true, kExtendManyBody, kExtendOne)};
const Script kLeave[2] = {pair("semLeave", false, kLeaveBody), pair("shardedSemLeave", true, kLeaveBody)};
const Script kResize[2] = {boundPair("semResize", false, kResizeBody), boundPair("shardedSemResize", true, kResizeBody)};
const Script kInspect = makeScript("semInspect", kInspectSource);

}  // namespace

const Script& semaphoreAcquireScript(bool sharded) { return kAcquire[sharded ? 1 : 0]; }
const Script& semaphoreReleaseScript(bool sharded) { return kRelease[sharded ? 1 : 0]; }
const Script& semaphoreExtendScript(bool sharded) { return kExtend[sharded ? 1 : 0]; }
const Script& semaphoreExtendManyScript(bool sharded) { return kExtendMany[sharded ? 1 : 0]; }
const Script& semaphoreLeaveScript(bool sharded) { return kLeave[sharded ? 1 : 0]; }
const Script& semaphoreResizeScript(bool sharded) { return kResize[sharded ? 1 : 0]; }
const Script& semaphoreInspectScript() { return kInspect; }

}  // namespace dlock::detail
