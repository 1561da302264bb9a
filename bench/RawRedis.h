// SPDX-License-Identifier: Apache-2.0
// RawRedis.h — the physical limit: a plain blocking client with nothing of dlock in between, for
// the baselines the benchmarks compare against, and INFO commandstats for command counts. Over
// TCP and Unix sockets it is hiredis; over TLS (hiredis 0.14 has none) a blocking OpenSSL stream
// under hiredis's own formatter and reader, the least a TLS client does.
#pragma once

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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

// A blocking TLS connection (TLS_client_method, the URI's tls_ca_file, name checked as dlock does).
class RawTls {
 public:
  RawTls(const Endpoint& server, const std::string& caFile) {
    context_.reset(SSL_CTX_new(TLS_client_method()));
    SSL_CTX_set_min_proto_version(context_.get(), TLS1_2_VERSION);
    if (caFile.empty() ? SSL_CTX_set_default_verify_paths(context_.get()) != 1
                       : SSL_CTX_load_verify_locations(context_.get(), caFile.c_str(), nullptr) != 1) {
      throw std::runtime_error("cannot load the CA file");
    }
    SSL_CTX_set_verify(context_.get(), SSL_VERIFY_PEER, nullptr);
    redisContext* tcp = redisConnect(server.host.c_str(), server.port);  // a blocking TCP socket
    if (tcp == nullptr || tcp->err != 0) throw std::runtime_error("cannot connect to " + server.address());
    fd_ = ::dup(tcp->fd);
    redisFree(tcp);
    const int one = 1;
    (void)::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ssl_.reset(SSL_new(context_.get()));
    SSL_set_fd(ssl_.get(), fd_);
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_.get()), server.host.c_str());
    if (SSL_connect(ssl_.get()) != 1) throw std::runtime_error("TLS handshake with " + server.address() + " failed");
    reader_.reset(redisReaderCreate());
  }
  RawTls(const RawTls&) = delete;
  RawTls& operator=(const RawTls&) = delete;
  ~RawTls() {
    ssl_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  redisReply* command(int argc, const char** argv, const size_t* lengths) {
    char* formatted = nullptr;
    const int length = redisFormatCommandArgv(&formatted, argc, argv, lengths);
    const int sent = SSL_write(ssl_.get(), formatted, length);
    redisFreeCommand(formatted);
    if (sent != length) throw std::runtime_error("TLS write failed");
    void* reply = nullptr;
    while (true) {
      if (redisReaderGetReply(reader_.get(), &reply) != REDIS_OK) throw std::runtime_error("protocol error");
      if (reply != nullptr) return static_cast<redisReply*>(reply);
      char buffer[16 * 1024];
      const int got = SSL_read(ssl_.get(), buffer, sizeof buffer);
      if (got <= 0) throw std::runtime_error("TLS read failed");
      redisReaderFeed(reader_.get(), buffer, static_cast<size_t>(got));
    }
  }

 private:
  struct FreeContext {
    void operator()(SSL_CTX* context) const { SSL_CTX_free(context); }
  };
  struct FreeSsl {
    void operator()(SSL* ssl) const { SSL_free(ssl); }
  };
  struct FreeReader {
    void operator()(redisReader* reader) const { redisReaderFree(reader); }
  };
  std::unique_ptr<SSL_CTX, FreeContext> context_;
  std::unique_ptr<SSL, FreeSsl> ssl_;
  std::unique_ptr<redisReader, FreeReader> reader_;
  int fd_ = -1;
};

class RawRedis {
 public:
  explicit RawRedis(const Endpoint& server) {
    context_.reset(redisConnect(server.host.c_str(), server.port));
    if (!context_ || context_->err) {
      throw std::runtime_error("cannot connect to " + server.host + ":" + std::to_string(server.port));
    }
  }
  // The server of a URI, as dlock::parseUri reads it: the first host of "redis://host:port/...",
  // over TLS for "rediss://" (its tls_ca_file trusted), or the socket of "unix:///path".
  explicit RawRedis(const std::string& uri) : RawRedis(parseUri(uri)) {}
  explicit RawRedis(const ParsedUri& uri) {
    if (uri.scheme == "rediss") {
      tls_ = std::make_unique<RawTls>(uri.hosts.at(0), uri.text("tls_ca_file", ""));
      return;
    }
    context_.reset(uri.socketPath.empty() ? redisConnect(uri.hosts.at(0).host.c_str(), uri.hosts.at(0).port)
                                          : redisConnectUnix(uri.socketPath.c_str()));
    if (!context_ || context_->err) throw std::runtime_error("cannot connect to " + uri.redacted);
  }

  // One command as argv; throws on I/O errors (an error reply is returned like any other).
  Reply command(const std::vector<std::string>& args) {
    if (tls_) {
      std::vector<const char*> argv;
      std::vector<size_t> lengths;
      for (const auto& arg : args) {
        argv.push_back(arg.data());
        lengths.push_back(arg.size());
      }
      return Reply(tls_->command(static_cast<int>(argv.size()), argv.data(), lengths.data()));
    }
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
  // The commands a lock's clients send (EVALSHA, SUBSCRIBE, PING, ...) in `calls`, not the calls
  // scripts make inside them: round trips and messages, as the benchmarks count them.
  static long long clientCommands(const std::map<std::string, long long>& calls) {
    long long sent = 0;
    for (const char* name : {"evalsha", "eval", "subscribe", "unsubscribe", "ssubscribe", "sunsubscribe", "ping",
                             "auth", "select"}) {
      const auto found = calls.find(name);
      if (found != calls.end()) sent += found->second;
    }
    return sent;
  }
  // Every call in `calls` (the scripts' own included) but INFO's, which reads them.
  static long long serverCalls(const std::map<std::string, long long>& calls) {
    long long all = 0;
    for (const auto& [command, count] : calls) {
      if (command != "info") all += count;
    }
    return all;
  }
  // The machine's round trip to the server: the p50 of `samples` raw PINGs, in µs.
  double roundTripUs(int samples = 3000) {
    std::vector<double> times;
    for (int i = 0; i < samples; ++i) {
      const auto start = std::chrono::steady_clock::now();
      command({"PING"});
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  // What the server has spent so far, to subtract two snapshots: its CPU time (user + system,
  // the event loop and its system calls included) and the time inside scripts (EVALSHA and EVAL,
  // the calls they make included), in µs.
  struct ServerCost {
    double cpuUs = 0;
    double scriptUs = 0;
  };
  ServerCost serverCost() {
    const std::string cpu = text({"INFO", "cpu"});
    auto usec = test::commandStatIn(text({"INFO", "commandstats"}), "usec=");
    return {(numberAfter(cpu, "used_cpu_user:") + numberAfter(cpu, "used_cpu_sys:")) * 1e6,
            static_cast<double>(usec["evalsha"] + usec["eval"])};
  }

 private:
  // The number after `field` ("used_cpu_user:") at the start of a line of INFO text; 0 if absent.
  static double numberAfter(const std::string& info, const std::string& field) {
    const std::size_t at = info.find("\n" + field);
    return at == std::string::npos ? 0 : std::strtod(info.c_str() + at + 1 + field.size(), nullptr);
  }

  struct Free {
    void operator()(redisContext* context) const { redisFree(context); }
  };
  std::unique_ptr<redisContext, Free> context_;
  std::unique_ptr<RawTls> tls_;
};

}  // namespace dlock::bench
