#include "Scripts.h"

#include "Digest.h"

namespace dlock::detail {
namespace {

Script makeScript(const char* name, std::string source) {
  std::string sha = sha1Hex(source);
  return Script{name, std::move(source), std::move(sha)};
}

Argv scriptArgv(std::string_view command, std::string_view body, const std::string& keyCount, const Argv& keys,
                const Argv& args) {
  Argv argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back(command);
  argv.push_back(body);
  argv.push_back(keyCount);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// PUBLISH (SPUBLISH on a cluster) before DEL: a script is not rolled back, so a publish the ACL
// (or a cluster slot check) refuses must fail before the key is gone. The order is invisible
// otherwise: subscribers get the message only after the whole script has run.
#ifndef DLOCK_BREAK_RELEASE_CHECK
std::string releaseSource(const char* publish) {
  return std::string(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  local notified = redis.call(')lua") + publish + R"lua(', ARGV[2], '1')
  redis.call('DEL', KEYS[1])
  return {1, notified}
end
return {0, 0}
)lua";
}
#else
// Deliberately broken (CMake option DLOCK_BREAK_RELEASE_CHECK, for the fault-testing harness
// only): deletes the key whoever owns it, so a holder whose lease ran out releases its
// successor's hold. The harness's checker must catch it.
std::string releaseSource(const char* publish) {
  return std::string(R"lua(
local notified = redis.call(')lua") + publish + R"lua(', ARGV[2], '1')
return {redis.call('DEL', KEYS[1]), notified}
)lua";
}
#endif

}  // namespace

const Script& acquireScript() {
  // The fencing token is the last one plus one, and never below the server's clock in
  // microseconds: a server that lost the counter (restarted without persistence, or a replica
  // promoted before the last writes reached it) would otherwise hand out 1, 2, 3 again, below
  // tokens already accepted downstream. The clock only has to be ahead of where it was when the
  // lost tokens were issued; on a clock that went back the counter still rises by one. The
  // numbers stay below 2^53, exact in Lua's doubles, until the year 2255.
  // Fence before SET: a script is not rolled back, so the step that can fail (a fence key of the
  // wrong type, an ACL, OOM) must fail before the key is set, or the key would stay held by an
  // acquire that reported an error. A SET refused after it leaves a fence raised, which only has
  // to grow. A retried acquire whose first try landed finds its own token and succeeds again, so
  // a retry after a lost reply is safe.
  static const Script script = makeScript("acquire", R"lua(
if redis.call('EXISTS', KEYS[1]) == 0 then
  local now = redis.call('TIME')
  local last = tonumber(redis.call('GET', KEYS[2]) or '0')
  local fence = math.max(last + 1, now[1] * 1000000 + now[2])
  redis.call('SET', KEYS[2], string.format('%.0f', fence))
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, fence}
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
return {0, redis.call('PTTL', KEYS[1])}
)lua");
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

const Script& extendScript() {
  static const Script script = makeScript("extend", R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
)lua");
  return script;
}

const Script& extendManyScript() {
  static const Script script = makeScript("extendMany", R"lua(
local extended = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i + 1] then
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
  static const Script script = makeScript("inspect", R"lua(
return {redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
)lua");
  return script;
}

const Script& raiseFenceScript() {
  static const Script script = makeScript("raiseFence", R"lua(
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local wanted = tonumber(ARGV[1])
if wanted > current then
  redis.call('SET', KEYS[1], ARGV[1])
  return wanted
end
return current
)lua");
  return script;
}

ReplyPtr runScript(Connection& connection, const Script& script, const Argv& keys, const Argv& args) {
  const std::string keyCount = std::to_string(keys.size());
  ReplyPtr reply = connection.command(scriptArgv("EVALSHA", script.sha, keyCount, keys, args));
  if (isErrorReply(*reply, "NOSCRIPT")) reply = connection.command(scriptArgv("EVAL", script.source, keyCount, keys, args));
  return reply;
}

ReplyPtr runScriptAsking(Connection& connection, const Script& script, const Argv& keys, const Argv& args) {
  // ASKING holds for the next command only, so both go on one connection back to back; EVAL
  // rather than EVALSHA, as the importing node may not have the script yet.
  connection.append({"ASKING"});
  connection.append(scriptArgv("EVAL", script.source, std::to_string(keys.size()), keys, args));
  ReplyPtr asking = connection.readReply();
  ReplyPtr reply = connection.readReply();
  return asking->type == REDIS_REPLY_ERROR ? std::move(asking) : std::move(reply);
}

std::vector<ReplyPtr> runScriptPipelined(Connection& connection, const Script& script,
                                         const std::vector<std::pair<Argv, Argv>>& calls) {
  std::vector<ReplyPtr> replies;
  replies.reserve(calls.size());
  std::vector<std::string> keyCounts;
  keyCounts.reserve(calls.size());
  for (const auto& [keys, args] : calls) {
    keyCounts.push_back(std::to_string(keys.size()));
    connection.append(scriptArgv("EVALSHA", script.sha, keyCounts.back(), keys, args));
  }
  for (std::size_t i = 0; i < calls.size(); ++i) replies.push_back(connection.readReply());

  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < replies.size(); ++i) {
    if (isErrorReply(*replies[i], "NOSCRIPT")) missing.push_back(i);
  }
  for (std::size_t i : missing) {
    connection.append(scriptArgv("EVAL", script.source, keyCounts[i], calls[i].first, calls[i].second));
  }
  for (std::size_t i : missing) replies[i] = connection.readReply();
  return replies;
}

}  // namespace dlock::detail
