// SPDX-License-Identifier: Apache-2.0
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

#include "HiredisCommand.h"

namespace dlock::test {

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
    redisReply* raw = commandArgv(*context_, args);
    if (raw == nullptr) throw std::runtime_error(std::string("test client: ") + context_->errstr);
    Reply reply = toReply(*raw);
    freeReplyObject(raw);
    return reply;
  }

  // A command whose reply must not be an error.
  Reply ok(const std::vector<std::string>& args) {
    Reply reply = command(args);
    if (reply.isError()) throw std::runtime_error("test client: " + args.front() + ": " + reply.str);
    return reply;
  }

  // The next reply the server pushes unasked (a subscribed connection's message); throws when none
  // comes within the client's timeout.
  Reply next() {
    void* raw = nullptr;
    if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) {
      throw std::runtime_error(std::string("test client: no reply: ") + context_->errstr);
    }
    Reply reply = toReply(*static_cast<redisReply*>(raw));
    freeReplyObject(raw);
    return reply;
  }

  // `calls` of each command in INFO commandstats, e.g. counts["evalsha"].
  std::map<std::string, long long> commandCalls() { return commandCallsIn(ok({"INFO", "commandstats"}).str); }

  // How many error replies starting with `prefix` the server sent (INFO errorstats), e.g.
  // "DLOCKLATE": the bound scripts it refused for arriving after their caller gave up.
  long long errorReplies(const std::string& prefix) {
    const std::string info = ok({"INFO", "errorstats"}).str;
    const std::string field = "errorstat_" + prefix + ":count=";
    const auto at = info.find(field);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + field.size()));
  }

 private:
  struct Free {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, Free> context_;
};

}  // namespace dlock::test
