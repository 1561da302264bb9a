// RawRedis.h — the physical limit: plain blocking hiredis with nothing of dlock in between, for
// the baselines the benchmarks compare against, and INFO commandstats for command counts.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "HiredisCommand.h"  // tests/support: the argv command and commandstats, shared with the tests
#include "dlock/uri.h"

namespace dlock::bench {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

class RawRedis {
 public:
  explicit RawRedis(const Endpoint& server) {
    context_.reset(redisConnect(server.host.c_str(), server.port));
    if (!context_ || context_->err) {
      throw std::runtime_error("cannot connect to " + server.host + ":" + std::to_string(server.port));
    }
  }
  // The first host of a URI, as dlock::parseUri reads it ("redis://host:port/...?...").
  explicit RawRedis(const std::string& uri) : RawRedis(parseUri(uri).hosts.at(0)) {}

  // One command as argv; throws on I/O errors (an error reply is returned like any other).
  Reply command(const std::vector<std::string>& args) {
    Reply reply(test::commandArgv(*context_, args));
    if (!reply) throw std::runtime_error(context_->errstr);
    return reply;
  }
  // As command(), and an error reply throws too.
  Reply ok(const std::vector<std::string>& args) {
    Reply reply = command(args);
    if (reply->type == REDIS_REPLY_ERROR) throw std::runtime_error("reply: " + std::string(reply->str, reply->len));
    return reply;
  }
  std::string text(const std::vector<std::string>& args) {
    const Reply reply = command(args);
    return reply->str != nullptr ? std::string(reply->str, reply->len) : std::to_string(reply->integer);
  }
  // `calls` per command name ("evalsha", "set", ...) from INFO commandstats. It counts the
  // commands scripts run inside EVALSHA as well, which are not round trips.
  std::map<std::string, long long> commandCalls() { return test::commandCallsIn(text({"INFO", "commandstats"})); }

 private:
  struct Free {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, Free> context_;
};

}  // namespace dlock::bench
