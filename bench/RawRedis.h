// RawRedis.h — the physical limit: plain blocking hiredis with nothing of dlock in between, for
// the baselines the benchmarks compare against, and INFO commandstats for command counts.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::bench {

struct HostPort {
  std::string host;
  int port = 0;
};

// "redis://host:port[...]" → host and port (the benchmarks only use plain local URIs).
inline HostPort parseRedisUri(const std::string& uri) {
  const auto start = uri.find("://");
  const std::string rest = uri.substr(start == std::string::npos ? 0 : start + 3);
  const auto colon = rest.rfind(':');
  const auto end = rest.find_first_of("/?", colon);
  return {rest.substr(0, colon), std::atoi(rest.substr(colon + 1, end - colon - 1).c_str())};
}

class RawRedis {
 public:
  explicit RawRedis(const HostPort& server) {
    context_.reset(redisConnect(server.host.c_str(), server.port));
    if (!context_ || context_->err) throw std::runtime_error("cannot connect to " + server.host);
  }
  // One command as argv; returns the reply (caller frees) and throws on I/O errors.
  redisReply* command(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lengths;
    for (const auto& arg : args) {
      argv.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data()));
    if (reply == nullptr) throw std::runtime_error(context_->errstr);
    return reply;
  }
  std::string text(const std::vector<std::string>& args) {
    redisReply* reply = command(args);
    std::string out = reply->str != nullptr ? std::string(reply->str, reply->len) : std::to_string(reply->integer);
    freeReplyObject(reply);
    return out;
  }
  // Sum of `calls` over INFO commandstats, minus the INFO calls made to read it.
  long long totalCommands() {
    const std::string info = text({"INFO", "commandstats"});
    long long total = 0;
    long long infoCalls = 0;
    std::size_t pos = 0;
    while ((pos = info.find("cmdstat_", pos)) != std::string::npos) {
      const auto colon = info.find(':', pos);
      const auto calls = info.find("calls=", colon);
      const long long count = std::atoll(info.c_str() + calls + 6);
      if (info.compare(pos + 8, colon - pos - 8, "info") == 0) infoCalls = count;
      total += count;
      pos = colon;
    }
    return total - infoCalls;
  }

 private:
  struct Free {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, Free> context_;
};

}  // namespace dlock::bench
