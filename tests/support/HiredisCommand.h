// SPDX-License-Identifier: Apache-2.0
// HiredisCommand.h — what every plain hiredis client outside the library shares (the tests'
// RedisClient, the benchmarks' RawRedis): an argv command, a reply copied into a value, and the
// calls per command in INFO commandstats. Header-only, hiredis only, so bench/ can use it too.
// Independent of dlock's own connection code on purpose.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace dlock::test {

// A reply as a value, its elements copied.
struct Reply {
  int type = 0;  // REDIS_REPLY_*
  std::string str;
  long long integer = 0;
  std::vector<Reply> elements;

  [[nodiscard]] bool isNil() const { return type == REDIS_REPLY_NIL; }
  [[nodiscard]] bool isError() const { return type == REDIS_REPLY_ERROR; }
};

inline Reply toReply(const redisReply& raw) {
  Reply reply;
  reply.type = raw.type;
  reply.integer = raw.integer;
  if (raw.str != nullptr) reply.str.assign(raw.str, raw.len);
  for (size_t i = 0; i < raw.elements; ++i) reply.elements.push_back(toReply(*raw.element[i]));
  return reply;
}

// Sends `args` as one binary-safe argv command and reads its reply (freed by the caller with
// freeReplyObject); null on an I/O error, with context.errstr set.
inline redisReply* commandArgv(redisContext& context, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  argv.reserve(args.size());
  lengths.reserve(args.size());
  for (const auto& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  return static_cast<redisReply*>(redisCommandArgv(&context, static_cast<int>(argv.size()), argv.data(), lengths.data()));
}

// One integer statistic (`stat`: "calls=", "usec=") per command name ("evalsha", "set", ...) in
// the text of INFO commandstats.
inline std::map<std::string, long long> commandStatIn(const std::string& info, const std::string& stat) {
  std::map<std::string, long long> values;
  std::size_t pos = 0;
  while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
    const auto colon = info.find(':', pos);
    const auto value = info.find(stat, colon);
    if (colon == std::string::npos || value == std::string::npos) break;
    values[info.substr(pos + 8, colon - pos - 8)] = std::atoll(info.c_str() + value + stat.size());
    pos = colon;
  }
  return values;
}

// `calls` per command name. It counts the commands scripts run inside EVALSHA as well, which are
// not round trips.
inline std::map<std::string, long long> commandCallsIn(const std::string& info) { return commandStatIn(info, "calls="); }

}  // namespace dlock::test
