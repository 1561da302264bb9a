// SPDX-License-Identifier: Apache-2.0
#include "Permissions.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "Errors.h"
#include "Reply.h"

namespace dlock::detail {

std::vector<CommandSample> neededCommands(const Topology& topology, const KeyNames& names, bool waitsForReplicas) {
  const std::string key = names.lock();
  const std::string channel = names.channel();
  const bool sharded = topology.sharded();
  // What the calls send themselves, then what the scripts run (Scripts.cpp, FairScripts.cpp,
  // ReadWriteScripts.cpp, SemaphoreScripts.cpp, ConditionScripts.cpp, ReleaseSource.cpp).
  std::vector<CommandSample> commands = {
      {"PING"},
      {"TIME"},
      {"EVALSHA", "0", "0"},
      {"EVAL", "return 0", "0"},
      {sharded ? "SSUBSCRIBE" : "SUBSCRIBE", channel},
      {sharded ? "SPUBLISH" : "PUBLISH", channel, "1"},
      {"GET", key},
      {"MGET", key},
      {"SET", key, "1"},
      {"DEL", key},
      {"EXISTS", key},
      {"INCR", key},
      {"PTTL", key},
      {"PEXPIRE", key, "1"},
      {"PEXPIREAT", key, "1"},
      {"HGET", key, "f"},
      {"HMGET", key, "f"},
      {"HSET", key, "f", "1"},
      {"HDEL", key, "f"},
      {"HINCRBY", key, "f", "1"},
      {"LINDEX", key, "0"},
      {"LPOP", key},
      {"LPOS", key, "1"},
      {"LRANGE", key, "0", "1"},
      {"LREM", key, "0", "1"},
      {"RPUSH", key, "1"},
      {"ZADD", key, "1", "m"},
      {"ZCARD", key},
      {"ZRANGE", key, "0", "1"},
      {"ZRANGEBYSCORE", key, "0", "1"},
      {"ZREM", key, "m"},
      {"ZREMRANGEBYSCORE", key, "0", "1"},
      {"ZSCORE", key, "m"},
  };
  if (waitsForReplicas) commands.push_back({"WAIT", "0", "0"});
  for (CommandSample& own : topology.nodeCommands()) commands.push_back(std::move(own));
  return commands;
}

namespace {

std::string lowered(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

}  // namespace

std::string aclRule(const std::vector<CommandSample>& commands, const std::string& prefix) {
  std::string rule = "~" + prefix + "* &" + prefix + "*";
  for (const CommandSample& command : commands) {
    // A container command is granted by its subcommand alone: +cluster|slots.
    std::string name = lowered(command[0]);
    if (name == "cluster") name += "|" + lowered(command[1]);
    rule += " +" + name;
  }
  return rule;
}

std::vector<std::string> refusedCommands(Connection& connection, const std::vector<CommandSample>& commands) {
  // Each check goes as its argument count, then the argv; a server before 7.0 has no
  // acl_check_cmd, and its scripts' commands are checked when they run.
  static constexpr std::string_view kCheck = R"lua(
if not redis.acl_check_cmd then return {} end
local refused, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local check = {}
  for j = 1, n do check[j] = ARGV[i + j] end
  local known, allowed = pcall(redis.acl_check_cmd, unpack(check))
  if known and not allowed then refused[#refused + 1] = check[1] end
  i = i + n + 1
end
return refused
)lua";
  std::vector<std::string> counts;
  counts.reserve(commands.size());
  for (const CommandSample& command : commands) counts.push_back(std::to_string(command.size()));
  Argv argv = {"EVAL", kCheck, "0"};
  for (std::size_t i = 0; i < commands.size(); ++i) {
    argv.emplace_back(counts[i]);
    argv.insert(argv.end(), commands[i].begin(), commands[i].end());
  }
  const ReplyPtr reply = connection.command(argv);
  // Refused outright (EVAL itself not granted): the caller names the fix. Another error (a busy
  // script, a server without scripting) leaves the check to the first lock.
  if (isErrorReply(*reply, "NOPERM")) throwReplyError(*reply, "EVAL on " + connection.address());
  std::vector<std::string> refused;
  if (reply->type != REDIS_REPLY_ARRAY) return refused;
  for (std::size_t i = 0; i < reply->elements; ++i) {
    const redisReply& name = *reply->element[i];
    if (name.type != REDIS_REPLY_STRING) continue;
    std::string text(name.str, name.len);
    if (std::find(refused.begin(), refused.end(), text) == refused.end()) refused.push_back(std::move(text));
  }
  return refused;
}

}  // namespace dlock::detail
