// SPDX-License-Identifier: Apache-2.0
// AppRedis.h — the examples' own client for application data (funds, inventories, cache entries,
// accounts): plain hiredis, every command an argv so data never passes through a format string.
// Locks never go through here; they go through dlock. Also the little command-line parsing the
// examples share.
// Owner: one per thread. Thread safety: not thread-safe (a redisContext is not).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dlock/uri.h"

namespace examples {

struct Reply {
  int type = REDIS_REPLY_NIL;
  std::string str;
  long long integer = 0;
  std::vector<Reply> elements;

  [[nodiscard]] bool isNil() const { return type == REDIS_REPLY_NIL; }
  [[nodiscard]] bool isError() const { return type == REDIS_REPLY_ERROR; }
};

using Command = std::vector<std::string>;

class AppRedis {
 public:
  // Connects to the server of a redis:// URI (the one dlock locks on), with its AUTH and db.
  explicit AppRedis(const std::string& uri) {
    const dlock::ParsedUri parsed = dlock::parseUri(uri);
    // App data lives on one server here; the locks could live elsewhere, but the examples keep
    // both on the same one.
    if (parsed.scheme != "redis" || parsed.hosts.size() != 1) {
      throw std::runtime_error("the examples keep their data on one server: give a redis:// URI, not " +
                               parsed.redacted);
    }
    const timeval connectTimeout{5, 0};
    // Longer than the market's 5 s BLPOP, so that one answers rather than timing out here.
    const timeval commandTimeout{10, 0};
    context_.reset(redisConnectWithTimeout(parsed.hosts[0].host.c_str(), parsed.hosts[0].port, connectTimeout));
    if (!context_ || context_->err != 0) {
      throw std::runtime_error("cannot connect to " + parsed.redacted + ": " +
                               (context_ ? context_->errstr : "out of memory"));
    }
    redisSetTimeout(context_.get(), commandTimeout);
    if (!parsed.password.empty()) {
      Command auth{"AUTH"};
      if (!parsed.user.empty()) auth.push_back(parsed.user);
      auth.push_back(parsed.password);
      (void)command(auth);
    }
    if (parsed.db != 0) (void)command({"SELECT", std::to_string(parsed.db)});
  }

  // One command; an error reply or an I/O error throws.
  Reply command(const Command& args) {
    Reply reply = pipeline({args}).front();
    if (reply.isError()) throw std::runtime_error(args.front() + ": " + reply.str);
    return reply;
  }

  // Sends every command, then reads every reply (one round trip); error replies are returned,
  // I/O errors throw. MULTI ... EXEC goes through here as one batch.
  std::vector<Reply> pipeline(const std::vector<Command>& commands) {
    for (const auto& args : commands) {
      std::vector<const char*> argv;
      std::vector<size_t> lengths;
      for (const auto& arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
      }
      if (redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data()) !=
          REDIS_OK) {
        throw std::runtime_error(std::string("redis: ") + context_->errstr);
      }
    }
    std::vector<Reply> replies;
    for (std::size_t i = 0; i < commands.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(context_.get(), &raw) != REDIS_OK || raw == nullptr) {
        throw std::runtime_error(std::string("redis: ") + context_->errstr);
      }
      replies.push_back(convert(*static_cast<redisReply*>(raw)));
      freeReplyObject(raw);
    }
    return replies;
  }

  // An integer field of a hash (0 when absent).
  long long hashInt(const std::string& key, const std::string& field) {
    const Reply value = command({"HGET", key, field});
    return value.isNil() ? 0 : std::stoll(value.str);
  }

 private:
  static Reply convert(const redisReply& raw) {
    Reply reply;
    reply.type = raw.type;
    reply.integer = raw.integer;
    if (raw.str != nullptr) reply.str.assign(raw.str, raw.len);
    for (std::size_t i = 0; i < raw.elements; ++i) reply.elements.push_back(convert(*raw.element[i]));
    return reply;
  }

  struct Free {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, Free> context_;
};

// A bad command line; the programs answer it with their usage text and exit code 2.
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// "mode --name value ..." plus the URI from --uri or DLOCK_URI; UsageError on anything else.
class CommandLine {
 public:
  CommandLine(int argc, char** argv) {
    int i = 1;
    if (i < argc && argv[i][0] != '-') mode_ = argv[i++];
    for (; i < argc; ++i) {
      const std::string name = argv[i];
      if (name.rfind("--", 0) != 0 || i + 1 >= argc) throw UsageError("unexpected argument " + name);
      options_[name.substr(2)] = argv[++i];
    }
    if (const auto it = options_.find("uri"); it != options_.end()) {
      uri_ = it->second;
    } else if (const char* env = std::getenv("DLOCK_URI"); env != nullptr && *env != '\0') {
      uri_ = env;
    } else {
      throw UsageError("no Redis URI: pass --uri redis://HOST:PORT or set DLOCK_URI");
    }
  }

  [[nodiscard]] const std::string& mode() const { return mode_; }
  [[nodiscard]] const std::string& uri() const { return uri_; }
  [[nodiscard]] std::string text(const std::string& name, const std::string& fallback) const {
    const auto it = options_.find(name);
    return it == options_.end() ? fallback : it->second;
  }
  [[nodiscard]] int number(const std::string& name, int fallback) const {
    const auto it = options_.find(name);
    if (it == options_.end()) return fallback;
    const std::string& text = it->second;
    if (text.empty() || text.size() > 6 || text.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError("--" + name + " wants a number from 0 to 999999, not '" + text + "'");
    }
    return std::stoi(text);
  }

 private:
  std::string mode_;
  std::string uri_;
  std::map<std::string, std::string> options_;
};

}  // namespace examples
