// RedisClient.h — a plain hiredis client for tests: checks what dlock stored, reads
// INFO commandstats, injects faults (CLIENT KILL, SCRIPT FLUSH, DEBUG SLEEP). Independent of
// dlock's own connection code on purpose. Not thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::test {

struct Reply {
  int type = 0;  // REDIS_REPLY_*
  std::string str;
  long long integer = 0;
  std::vector<Reply> elements;

  [[nodiscard]] bool isNil() const { return type == REDIS_REPLY_NIL; }
  [[nodiscard]] bool isError() const { return type == REDIS_REPLY_ERROR; }
};

class RedisClient {
 public:
  RedisClient(const std::string& host, int port, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    const timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    context_.reset(redisConnectWithTimeout(host.c_str(), port, tv));
    if (!context_ || context_->err) {
      throw std::runtime_error("test client: cannot connect to " + host + ":" + std::to_string(port) + ": " +
                               (context_ ? context_->errstr : "out of memory"));
    }
    redisSetTimeout(context_.get(), tv);
  }

  // Sends one command as a binary-safe argv; throws on I/O errors, returns error replies.
  Reply command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const auto& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* raw = static_cast<redisReply*>(
        redisCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (raw == nullptr) throw std::runtime_error(std::string("test client: ") + context_->errstr);
    Reply reply = convert(*raw);
    freeReplyObject(raw);
    return reply;
  }

  // A command whose reply must not be an error.
  Reply ok(const std::vector<std::string>& args) {
    Reply reply = command(args);
    if (reply.isError()) throw std::runtime_error("test client: " + args.front() + ": " + reply.str);
    return reply;
  }

  // `calls` of each command in INFO commandstats, e.g. counts["evalsha"].
  std::map<std::string, long long> commandCalls() {
    std::map<std::string, long long> counts;
    const std::string info = ok({"INFO", "commandstats"}).str;
    std::size_t pos = 0;
    while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
      const auto colon = info.find(':', pos);
      const auto calls = info.find("calls=", colon);
      const auto comma = info.find(',', calls);
      counts[info.substr(pos + 8, colon - pos - 8)] = std::stoll(info.substr(calls + 6, comma - calls - 6));
      pos = comma;
    }
    return counts;
  }

 private:
  static Reply convert(const redisReply& raw) {
    Reply reply;
    reply.type = raw.type;
    reply.integer = raw.integer;
    if (raw.str != nullptr) reply.str.assign(raw.str, raw.len);
    for (size_t i = 0; i < raw.elements; ++i) reply.elements.push_back(convert(*raw.element[i]));
    return reply;
  }

  struct Free {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, Free> context_;
};

}  // namespace dlock::test
