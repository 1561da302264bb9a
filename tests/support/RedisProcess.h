// SPDX-License-Identifier: Apache-2.0
// RedisProcess.h — a private redis-server for one test: a free loopback port, a config in a
// temporary directory (no persistence), started, waited for (PING), and killed by pid and
// cleaned up on destruction. hiredis's test.sh, in C++.
//
// With `tls`, the server also listens with TLS on tlsPort() (and the replication and cluster links
// use TLS when the config says tls-replication / tls-cluster yes); with `unixSocket`, also on
// directory()/redis.sock. The plain port stays, for the tests' own checks (RedisClient).
//
// Set DLOCK_TEST_REDIS=host:port to use an outside server instead (then stop/restart/pause are
// refused). A missing redis-server or a server that does not answer is an error, never a skip.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test {

class RedisProcess {
 public:
  struct Tls {
    std::string certFile;  // the server's certificate and key (TlsCertificates::server())
    std::string keyFile;
    std::string caFile;        // the CA of client certificates
    bool authClients = false;  // tls-auth-clients: yes requires a client certificate
  };

  struct Options {
    std::vector<std::string> config;  // extra redis.conf lines, e.g. "requirepass secret"
    std::string executable = "redis-server";
    int port = 0;       // 0: a free loopback port
    bool sentinel = false;  // a redis-sentinel: no data-node settings (save, appendonly, debug)
    std::optional<Tls> tls;
    bool unixSocket = false;
    // Set in the server's environment (LD_PRELOAD of libfaketime, say).
    std::vector<std::pair<std::string, std::string>> env;
  };

  RedisProcess() : RedisProcess(Options{}) {}
  explicit RedisProcess(Options options);
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;
  ~RedisProcess();

  [[nodiscard]] const std::string& host() const { return host_; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string uri() const { return "redis://" + host_ + ":" + std::to_string(port_); }
  [[nodiscard]] const std::string& directory() const { return dir_; }
  // The TLS port (0 without Options::tls) and the Unix socket (empty without Options::unixSocket).
  [[nodiscard]] int tlsPort() const { return tlsPort_; }
  [[nodiscard]] std::string socketPath() const { return options_.unixSocket ? dir_ + "/redis.sock" : ""; }

  // SIGKILL and reap; the port stays reserved for restart().
  void kill();
  // Starts again on the same port and config (after kill()).
  void restart();
  // SIGSTOP / SIGCONT: the server stops answering without closing connections.
  void pause();
  void resume();
  [[nodiscard]] bool running() const { return pid_ > 0; }

 private:
  void start();
  void waitUntilReady(std::chrono::milliseconds budget);

  Options options_;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  int tlsPort_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
  bool external_ = false;
};

// A port on 127.0.0.1 with nothing listening now.
int freeLoopbackPort();

}  // namespace dlock::test
