// SPDX-License-Identifier: Apache-2.0
#include "Scripts.h"

#include <optional>

#include "Digest.h"
#include "ScriptSources.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

// The registry is one string, `listener=expiry-ms;` per waiting process in the order they first
// registered (`listener=expiry-ms~;` once a release woke it), with a TTL as long as its longest
// entry: a few bytes per waiter, read in the MGET the scripts make anyway, and no key without a
// TTL. An entry ends at its expiry (server time), renewed in place by the waiter's tries; a
// listener names the wake-up channel `<release channel>:<listener>`. The scripts edit the text
// with plain finds (C speed), not by parsing every entry: at 32 waiters a parse in Lua cost each
// hand-off tens of µs of the server.
//   registerWaiter  renews the listener's entry in place (clearing its woken mark), or appends it;
//                   past kMaxBytes it first drops the entries that ended (the release drops those
//                   it passes)
//   dropWaiter      takes the listener's entry out (it got the key)
//   requeueWaiter   moves the listener's entry to the end (it got the key, and another waiter of
//                   the same process still listens: it waits behind the others again)
//   wakeOne         publishes to the first live entries not woken yet in turn until one reaches a
//                   subscriber (at most three: a process killed with its entry left has no
//                   subscriber, and is dropped); the one reached is marked woken and keeps its
//                   place, so that a woken waiter whose try loses the key to a newcomer (and so
//                   renews its entry, unmarked) is woken first again, not sent to the back. A
//                   woken entry is passed over by the next release: its process had a whole hold
//                   to try, and one that no longer waits (its subscription lingering) costs one
//                   lost wake-up, found at the others' rechecks. Ended entries before go. The
//                   message is '1', as on the release channel. A refused publish (an ACL) wakes
//                   nobody: the waiters' rechecks find the key.
std::string waiterRegistryPrelude(const char* publish) {
  return std::string(R"lua(
local function serverMillis()
  local t = boundClock or redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function storeRest(key, rest)
  if rest == '' then redis.pcall('DEL', key) else redis.pcall('SET', key, rest, 'KEEPTTL') end
end
local function findWaiter(text, listener)
  local from = string.find(';' .. text, ';' .. listener .. '=', 1, true)
  if not from then return nil end
  return from, string.find(text, ';', from, true)
end
local function registerWaiter(key, text, listener, leaseMs, nowMs)
  local mine = listener .. '=' .. string.format('%d', nowMs + leaseMs) .. ';'
  local from, to = findWaiter(text, listener)
  if from and to then
    text = string.sub(text, 1, from - 1) .. mine .. string.sub(text, to + 1)
  else
    if #text > 16384 then
      local live = {}
      for entry, expiry in string.gmatch(text, '([^;=]*=(%d+)~?;)') do
        if tonumber(expiry) > nowMs then live[#live + 1] = entry end
      end
      text = table.concat(live)
    end
    if #text > 16384 then return end  -- full of live waiters: this one rechecks
    text = text .. mine
  end
  redis.pcall('SET', key, text, 'PX', leaseMs)
end
local function dropWaiter(key, text, listener)
  local from, to = findWaiter(text, listener)
  if from and to then storeRest(key, string.sub(text, 1, from - 1) .. string.sub(text, to + 1)) end
end
local function requeueWaiter(key, text, listener, leaseMs, nowMs)
  local from, to = findWaiter(text, listener)
  if from and to then text = string.sub(text, 1, from - 1) .. string.sub(text, to + 1) end
  registerWaiter(key, text, listener, leaseMs, nowMs)
end
local function wakeOne(key, text, channel, nowMs)
  local kept, reached, asked, at = '', 0, 0, 1
  while reached == 0 and asked < 3 do
    local equals = string.find(text, '=', at, true)
    local ends = equals and string.find(text, ';', equals, true)
    if not ends then
      at = #text + 1
      break
    end
    local from, woken = at, string.byte(text, ends - 1) == 126  -- '~'
    local expiry = tonumber(string.sub(text, equals + 1, woken and ends - 2 or ends - 1))
    at = ends + 1
    if expiry and expiry > nowMs then
      if woken then
        kept = kept .. string.sub(text, from, ends)
      else
        asked = asked + 1
        local heard = redis.pcall(')lua") + publish + R"lua(', channel .. ':' .. string.sub(text, from, equals - 1), '1')
        if type(heard) == 'number' then reached = heard end
        if reached > 0 then kept = kept .. string.sub(text, from, ends - 1) .. '~;' end
      end
    end
  end
  storeRest(key, kept .. string.sub(text, at))
  return reached
end
)lua";
}

namespace {

Script digested(const char* name, std::string source) {
  std::string sha = sha1Hex(source);
  return Script{name, std::move(source), std::move(sha)};
}

}  // namespace

Script makeScript(const char* name, std::string source) {
  // Every script declares `boundClock` (nil unless makeBoundScript's prelude set it), so that the
  // preludes bound and unbound scripts share may reuse its TIME.
  return digested(name, "local boundClock\n" + source);
}

Script makeBoundScript(const char* name, const std::string& body) {
  // TIME costs the server about a microsecond; the refusal is an error reply, so no reader of a
  // script's ordinary replies needs to know of it.
  // `boundClock` (the TIME reply) is there for a body to reuse: one server call fewer.
  Script script = digested(name, R"lua(local refuseAfter = table.remove(ARGV)
local boundClock
if refuseAfter ~= '' then
  boundClock = redis.call('TIME')
  if tonumber(boundClock[1]) * 1000 + math.floor(tonumber(boundClock[2]) / 1000) > tonumber(refuseAfter) then
    return redis.error_reply('DLOCKLATE the call reached the server after its caller stopped waiting; nothing was done')
  end
end
)lua" + body);
  script.refusesLate = true;
  return script;
}

namespace {

// `refuseAfter`: the bound script's extra ARGV, nullptr for a script that takes none.
Argv scriptArgv(std::string_view command, std::string_view body, const std::string& keyCount, const Argv& keys,
                const Argv& args, const std::string* refuseAfter) {
  Argv argv;
  argv.reserve(4 + keys.size() + args.size());
  argv.push_back(command);
  argv.push_back(body);
  argv.push_back(keyCount);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  if (refuseAfter != nullptr) argv.push_back(*refuseAfter);
  return argv;
}

// The acquire, running `onTaken` right after it sets the key (the owner label's SET, or nothing).
std::string acquireSource(const char* onTaken) {
  // The fencing token is the last one plus one, and never below the server's clock in
  // microseconds: a server that lost the counter (restarted without persistence, a replica
  // promoted before the last writes reached it, or the counter's own TTL ran out) would otherwise
  // hand out 1, 2, 3 again, below tokens already accepted downstream. The clock only has to be
  // ahead of where it was when the lost tokens were issued; on a clock that went back the
  // counter still rises by one.
  // Exact in 64 bits: the counter is raised by INCR (a Redis integer). Lua numbers are doubles,
  // exact to 2^53: below it the reply and the clock compare as numbers; above it the counter is
  // read back as text (the clock in µs is far below it). INCR refuses a counter at 2^63 - 1
  // before anything else is written.
  // The counter lives ARGV[3] ms after the last acquisition: the clock floor above makes an
  // expired counter safe unless the server's clock stepped back by more than that.
  // Fence before SET: a script is not rolled back, so the step that can fail (a fence key of the
  // wrong type, an ACL, OOM, an overflow) must fail before the key is set, or the key would stay
  // held by an acquire that reported an error. A retried acquire whose first try landed finds its
  // own token and succeeds again, so a retry after a lost reply is safe.
  // A token with a tombstone (ARGV[4], the token's release record, '0': see ReleaseSource.cpp) was
  // cancelled by its client: refused, whatever the key's state. A released record ('1') is of an
  // earlier try of the same token (Redlock rolls a partial acquire back by releasing it on every
  // node, and the lock tries again with that token): it goes at the token's next try on this
  // node, whether that try takes the key or not, or a release of a later hold that finds the key
  // lost here would take it for evidence that it ran.
  // Each redis.call costs the server microseconds, so the uncontended path makes few: one EXISTS
  // asks for the key, the token's record and the waiter registry at once (none: free, no
  // tombstone, nobody waiting; pcall, as the record may be refused during a migration, and then
  // they are asked apart); INCR's reply is exact below 2^53 (Lua's doubles), and only a larger
  // counter is read back as text.
  // The waiter registry (ARGV[5], see Scripts.h) joins the first EXISTS, so a free key nobody
  // waits for costs what it did; when any of the three exists, one MGET reads the record and the
  // registry (both strings: what EXISTS counted beyond them is the key), and only a held key is
  // read itself (a key of another type then fails there, as before). A try with a listener
  // (ARGV[6]: a process listening for the key's wake-ups) registers it when the key is taken, and
  // takes it out of the registry when it gets the key (or, when ARGV[8] says another waiter of
  // that listener still listens, moves it to the end: a woken entry keeps its place until its
  // process gets the key, and must not keep it for the process's next thread). A registry the
  // script could not read (a refused MGET during a migration) is left alone.
  return waiterRegistryPrelude("PUBLISH") + R"lua(
local present = redis.pcall('EXISTS', KEYS[1], ARGV[4], ARGV[5])
local free = present == 0
local known, waiting = free, false
if not free then
  local record
  local got = type(present) == 'number' and redis.pcall('MGET', ARGV[4], ARGV[5])
  if type(got) == 'table' and not got.err then
    record, waiting, known = got[1], got[2], true
    free = present == (record and 1 or 0) + (waiting and 1 or 0)
  else
    record = redis.pcall('GET', ARGV[4])
  end
  if record == '0' then return {0, 0} end
  if record == '1' then redis.pcall('DEL', ARGV[4]) end
  if not known then free = redis.call('EXISTS', KEYS[1]) == 0 end
end
if free then
  local counted = redis.call('INCR', KEYS[2])
  local now = boundClock or redis.call('TIME')
  local fence
  if counted < 9007199254740992 then
    fence = string.format('%d', math.max(counted, tonumber(now[1]) * 1000000 + tonumber(now[2])))
  else
    fence = redis.call('GET', KEYS[2])  -- beyond 2^53: as text, far above the clock in µs
  end
  redis.call('SET', KEYS[2], fence, 'PX', ARGV[3])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
)lua" + onTaken + R"lua(  if waiting and ARGV[6] ~= '' then
    if ARGV[8] ~= '1' then
      dropWaiter(ARGV[5], waiting, ARGV[6])
    else
      requeueWaiter(ARGV[5], waiting, ARGV[6], tonumber(ARGV[7]), tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
    end
  end
  return {1, fence}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, redis.call('GET', KEYS[2]) or '0'}
end
local left = redis.call('PTTL', KEYS[1])
if known and ARGV[6] ~= '' then registerWaiter(ARGV[5], waiting or '', ARGV[6], tonumber(ARGV[7]), serverMillis()) end
return {0, left}
)lua";
}

}  // namespace

const Script& acquireScript() {
  static const Script script = makeBoundScript("acquire", acquireSource(""));
  return script;
}

const Script& acquireRecordingOwnerScript() {
  // The owner record is one string with its TTL set in the same SET, so no failure between two
  // commands can leave it without one; `now` is the acquire's server TIME (seconds, µs). pcall: the
  // record is for diagnostics, and the lease is taken already (a script is not rolled back).
  static const Script script = makeBoundScript("acquireRecordingOwner", acquireSource(R"lua(
  redis.pcall('SET', KEYS[3], ARGV[1] .. '\n' .. now[1] .. string.format('%06d', tonumber(now[2])) .. '\n' .. ARGV[9],
              'PX', ARGV[2])
)lua"));
  return script;
}

const Script& releaseScript() {
  static const Script script = makeScript("release", releaseSource("PUBLISH"));
  return script;
}

const Script& shardedReleaseScript() {
  // The channel goes as ARGV, not KEYS: Redis 7.0 counts a declared channel as a missing key and
  // answers TRYAGAIN during a migration; it shares the lock's slot, which is what SPUBLISH needs.
  static const Script script = makeScript("shardedRelease", releaseSource("SPUBLISH"));
  return script;
}

// The extends renew the owner record with the lease (named in ARGV, renewed with pcall: as the
// release drops it); a lease without one pays a lookup of a missing key.
const Script& extendScript() {
  static const Script script = makeBoundScript("extend", R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.pcall('PEXPIRE', ARGV[3], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua");
  return script;
}

const Script& extendManyScript() {
  static const Script script = makeBoundScript("extendMany", R"lua(
local extended = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i + 1] then
    redis.pcall('PEXPIRE', ARGV[#KEYS + i + 1], ARGV[1])
    extended[i] = redis.call('PEXPIRE', key, ARGV[1])
  else
    extended[i] = 0
  end
end
return extended
)lua");
  return script;
}

const Script& inspectScript() {
  // The counter as text: exact whatever its size. The owner record only when it is the holder's
  // ("token\nsince\nlabel"); pcall, as the holder may be a key of another type.
  static const Script script = makeScript("inspect", R"lua(
local pttl = redis.call('PTTL', KEYS[1])
local fence = redis.call('GET', KEYS[2]) or '0'
local holder = redis.pcall('GET', KEYS[1])
local owner = redis.pcall('GET', ARGV[1])
if type(holder) == 'string' and type(owner) == 'string' and owner:sub(1, #holder + 1) == holder .. '\n' then
  return {pttl, fence, owner:sub(#holder + 2)}
end
return {pttl, fence}
)lua");
  return script;
}

const Script& raiseFenceScript() {
  // Compared as text of digits (ARGV[1] has no leading zeros): exact in 64 bits, as acquire's.
  static const Script script = makeScript("raiseFence", R"lua(
local current = redis.call('GET', KEYS[1]) or '0'
local wanted = ARGV[1]
if #wanted > #current or (#wanted == #current and wanted > current) then current = wanted end
redis.call('SET', KEYS[1], current, 'PX', ARGV[2])
return current
)lua");
  return script;
}

namespace {

// Every script and its digest made while the library loads: a child forked while a parent thread
// made one would wait for ever on its guard (MadeAtLoad).
const MadeAtLoad kScriptsMadeAtLoad([] {
  for (const auto script : {&acquireScript, &acquireRecordingOwnerScript, &releaseScript, &shardedReleaseScript,
                            &extendScript, &extendManyScript, &inspectScript, &raiseFenceScript}) {
    (void)script();
  }
});

// The bound script's extra ARGV, from the connection's clock; none for an unbound script.
std::optional<std::string> refuseAfterOf(const Connection& connection, const Script& script) {
  if (!script.refusesLate) return std::nullopt;
  return connection.refuseAfter();
}

const std::string* pointerTo(const std::optional<std::string>& value) { return value ? &*value : nullptr; }

// A refusal while the call is still waited for: the connection's clock sample is behind a step of
// the server's clock (else the server would have run it). Sampled anew, the call goes once more.
bool refusedInTime(const Script& script, const redisReply& reply) {
  return script.refusesLate && isErrorReply(reply, "DLOCKLATE") && !CallBudget::spent();
}

// One script call: TIME ahead of it when the clock sample is old; EVALSHA, then EVAL when the
// server lost the script; ASKING ahead of each send on an importing node.
ReplyPtr sendScript(Connection& connection, const Script& script, const Argv& keys, const Argv& args, bool asking) {
  const std::string keyCount = std::to_string(keys.size());
  bool sampling = script.refusesLate && connection.appendClockSampleIfStale();
  // One instant for the call: a NOSCRIPT fallback is the same call and carries the same one.
  std::optional<std::string> refuseAfter = refuseAfterOf(connection, script);
  const auto send = [&](std::string_view command, std::string_view body) {
    // ASKING holds for the next command only, so both go on one connection back to back.
    if (asking) connection.append({"ASKING"});
    connection.append(scriptArgv(command, body, keyCount, keys, args, pointerTo(refuseAfter)));
    if (sampling) connection.readClockSample();  // the TIME appended ahead of the first send
    sampling = false;
    ReplyPtr askingReply = asking ? connection.readReply() : nullptr;
    ReplyPtr reply = connection.readReply();
    return askingReply && askingReply->type == REDIS_REPLY_ERROR ? std::move(askingReply) : std::move(reply);
  };
  // EVAL rather than EVALSHA on an importing node, which may not have the script yet.
  ReplyPtr reply = asking ? send("EVAL", script.source) : send("EVALSHA", script.sha);
  if (isErrorReply(*reply, "NOSCRIPT")) reply = send("EVAL", script.source);
  if (refusedInTime(script, *reply)) {
    connection.sampleClockNow();
    refuseAfter = refuseAfterOf(connection, script);
    reply = send("EVAL", script.source);
  }
  return reply;
}

}  // namespace

ReplyPtr runScript(Connection& connection, const Script& script, const Argv& keys, const Argv& args) {
  return sendScript(connection, script, keys, args, false);
}

ReplyPtr runScriptAsking(Connection& connection, const Script& script, const Argv& keys, const Argv& args) {
  return sendScript(connection, script, keys, args, true);
}

std::vector<ReplyPtr> runScriptPipelined(Connection& connection, const Script& script,
                                         const std::vector<std::pair<Argv, Argv>>& calls) {
  std::vector<PipelinedScript> pipelined;
  pipelined.reserve(calls.size());
  for (const auto& call : calls) pipelined.push_back(PipelinedScript{&script, call.first, call.second});
  return runScriptsPipelined(connection, pipelined);
}

std::vector<ReplyPtr> runScriptsPipelined(Connection& connection, const std::vector<PipelinedScript>& calls) {
  std::vector<ReplyPtr> replies(calls.size());
  std::vector<std::string> keyCounts;
  keyCounts.reserve(calls.size());
  for (const auto& call : calls) keyCounts.push_back(std::to_string(call.keys.size()));
  bool bound = false;
  for (const auto& call : calls) bound = bound || call.script->refusesLate;
  // Sends the calls at `indexes` in one pipeline (one instant for all: the first reply is read
  // within the same budget), replacing their replies.
  std::optional<std::string> refuseAfter = bound ? connection.refuseAfter() : std::optional<std::string>();
  const auto sendAll = [&](const std::vector<std::size_t>& indexes, bool bySha) {
    const bool sampling = bound && connection.appendClockSampleIfStale();
    for (const std::size_t i : indexes) {
      const Script& script = *calls[i].script;
      connection.append(scriptArgv(bySha ? "EVALSHA" : "EVAL", bySha ? script.sha : script.source, keyCounts[i],
                                   calls[i].keys, calls[i].args, script.refusesLate ? pointerTo(refuseAfter) : nullptr));
    }
    if (sampling) connection.readClockSample();
    for (const std::size_t i : indexes) replies[i] = connection.readReply();
  };
  std::vector<std::size_t> all(calls.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  sendAll(all, true);
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (isErrorReply(*replies[i], "NOSCRIPT")) missing.push_back(i);
  }
  if (!missing.empty()) sendAll(missing, false);
  std::vector<std::size_t> refused;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (refusedInTime(*calls[i].script, *replies[i])) refused.push_back(i);
  }
  if (!refused.empty()) {
    connection.sampleClockNow();
    refuseAfter = connection.refuseAfter();
    sendAll(refused, false);
  }
  return replies;
}

}  // namespace dlock::detail
