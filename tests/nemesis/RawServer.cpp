// SPDX-License-Identifier: Apache-2.0
#include "RawServer.h"

#include <hiredis/hiredis.h>

#include <stdexcept>

#include "redis/src/KeyNames.h"

namespace dlock::nemesis {
namespace {

constexpr const char* kPrefix = "dlock:";

// The acquire script's fence (max(counter + 1, server µs)), then the key, whoever holds it.
constexpr const char* kTake = R"lua(
local counted = redis.call('INCR', KEYS[2])
local now = redis.call('TIME')
local fence = string.format('%d', math.max(counted, tonumber(now[1]) * 1000000 + tonumber(now[2])))
redis.call('SET', KEYS[2], fence, 'KEEPTTL')
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return fence
)lua";

}  // namespace

RawServer::RawServer(const std::string& uri) {
  const std::string scheme = "redis://";
  if (uri.rfind(scheme, 0) != 0) throw std::invalid_argument("RawServer: not a redis:// URI: " + uri);
  const std::string address = uri.substr(scheme.size(), uri.find_first_of("/?", scheme.size()) - scheme.size());
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw std::invalid_argument("RawServer: no port in " + uri);
  host_ = address.substr(0, colon);
  port_ = std::stoi(address.substr(colon + 1));
}

RawServer::~RawServer() {
  if (context_ != nullptr) redisFree(context_);
}

std::optional<std::string> RawServer::command(const std::vector<std::string>& args) {
  const std::lock_guard<std::mutex> guard(mutex_);
  if (context_ == nullptr) {
    const timeval timeout{0, 500'000};
    context_ = redisConnectWithTimeout(host_.c_str(), port_, timeout);
    if (context_ == nullptr) return std::nullopt;
    if (context_->err != 0) {
      redisFree(context_);
      context_ = nullptr;
      return std::nullopt;
    }
    redisSetTimeout(context_, timeout);
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string& arg : args) {
    argv.push_back(arg.data());
    lengths.push_back(arg.size());
  }
  auto* reply = static_cast<redisReply*>(redisCommandArgv(context_, static_cast<int>(argv.size()), argv.data(), lengths.data()));
  if (reply == nullptr) {
    redisFree(context_);
    context_ = nullptr;
    return std::nullopt;
  }
  std::optional<std::string> text;
  if (reply->type == REDIS_REPLY_INTEGER) text = std::to_string(reply->integer);
  if (reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) text = std::string(reply->str, reply->len);
  freeReplyObject(reply);
  return text;
}

std::optional<long long> RawServer::pttl(const std::string& key) {
  const auto reply = command({"PTTL", detail::KeyNames(kPrefix, key, false).lock()});
  if (!reply) return std::nullopt;
  return std::stoll(*reply);
}

bool RawServer::remove(const std::string& key) {
  return command({"DEL", detail::KeyNames(kPrefix, key, false).lock()}).has_value();
}

bool RawServer::persist(const std::string& key) {
  return command({"PERSIST", detail::KeyNames(kPrefix, key, false).lock()}).has_value();
}

std::optional<std::string> RawServer::evalText(const std::string& source, const std::vector<std::string>& keys,
                                               const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"EVAL", source, std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return command(argv);
}

std::optional<std::uint64_t> RawServer::take(const std::string& key, const std::string& token, long long ttlMs) {
  const detail::KeyNames names(kPrefix, key, false);
  const auto reply = command({"EVAL", kTake, "2", names.lock(), names.fence(), token, std::to_string(ttlMs)});
  if (!reply) return std::nullopt;
  try {
    return std::stoull(*reply);
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
}

std::optional<long long> RawServer::eval(const char* script, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& args) {
  std::vector<std::string> command = {"EVAL", script, std::to_string(keys.size())};
  command.insert(command.end(), keys.begin(), keys.end());
  command.insert(command.end(), args.begin(), args.end());
  const auto reply = RawServer::command(command);
  if (!reply) return std::nullopt;
  try {
    return std::stoll(*reply);
  } catch (const std::logic_error&) {
    return std::nullopt;
  }
}

}  // namespace dlock::nemesis
