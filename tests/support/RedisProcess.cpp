// SPDX-License-Identifier: Apache-2.0
#include "RedisProcess.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "RedisClient.h"

extern char** environ;

namespace dlock::test {

namespace {

// A redis-server answers PING within milliseconds of its start; a busy machine running sanitizer
// builds may stretch that to seconds. Only a server that never answers reaches this.
constexpr std::chrono::seconds kStartBudget{60};

}  // namespace

int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error(std::string("cannot find a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

RedisProcess::RedisProcess(Options options) : options_(std::move(options)) {
  if (const char* outside = std::getenv("DLOCK_TEST_REDIS"); outside != nullptr && *outside != '\0' &&
                                                              options_.config.empty()) {
    const std::string text = outside;
    const auto colon = text.rfind(':');
    host_ = text.substr(0, colon);
    port_ = std::stoi(text.substr(colon + 1));
    external_ = true;
    waitUntilReady(kStartBudget);
    return;
  }
  char pattern[] = "/tmp/dlock-redis-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  dir_ = pattern;
  if (options_.sentinel && options_.executable == "redis-server") options_.executable = "redis-sentinel";
  for (int attempt = 0;; ++attempt) {
    port_ = options_.port != 0 ? options_.port : freeLoopbackPort();
    if (options_.tls) {
      do {
        tlsPort_ = freeLoopbackPort();
      } while (tlsPort_ == port_);
    }
    try {
      start();
      return;
    } catch (const std::exception&) {
      // Another process may have taken the port between our check and the server's bind.
      if (attempt == 2 || options_.port != 0) {
        std::filesystem::remove_all(dir_);
        throw;
      }
    }
  }
}

RedisProcess::~RedisProcess() {
  if (external_) return;
  if (pid_ > 0) {
    if (::kill(pid_, SIGCONT) == 0) ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisProcess::start() {
  const std::string config = dir_ + "/redis.conf";
  {
    std::ofstream out(config);
    out << "bind 127.0.0.1\nport " << port_ << "\ndir " << dir_ << "\ndaemonize no\nlogfile " << dir_
        << "/redis.log\n";
    if (!options_.sentinel) out << "save \"\"\nappendonly no\nenable-debug-command yes\n";
    if (options_.tls) {
      out << "tls-port " << tlsPort_ << "\ntls-cert-file " << options_.tls->certFile << "\ntls-key-file "
          << options_.tls->keyFile << "\ntls-ca-cert-file " << options_.tls->caFile << "\ntls-auth-clients "
          << (options_.tls->authClients ? "yes" : "no") << "\n";
    }
    if (options_.unixSocket) out << "unixsocket " << dir_ << "/redis.sock\nunixsocketperm 700\n";
    for (const auto& line : options_.config) out << line << "\n";
  }
  // Built before fork(): the child of a threaded process only makes async-signal-safe calls.
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) environment.emplace_back(*entry);
  for (const auto& [name, value] : options_.env) environment.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<char*> argv{options_.executable.data(), const_cast<char*>(config.c_str()), nullptr};
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::execvpe(argv[0], argv.data(), envp.data());
    std::fprintf(stderr, "cannot run %s: %s (install redis-server)\n", options_.executable.c_str(), std::strerror(errno));
    ::_exit(127);
  }
  pid_ = child;
  try {
    waitUntilReady(kStartBudget);
  } catch (...) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw;
  }
}

void RedisProcess::waitUntilReady(std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  std::string lastError = "no answer";
  while (std::chrono::steady_clock::now() < deadline) {
    if (!external_) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        std::string log;
        std::ifstream in(dir_ + "/redis.log");
        std::getline(in, log, '\0');
        throw std::runtime_error("redis-server on port " + std::to_string(port_) + " exited at start (status " +
                                 std::to_string(status) + "): " + log.substr(log.size() > 600 ? log.size() - 600 : 0));
      }
    }
    try {
      RedisClient client(host_, port_, std::chrono::milliseconds(200));
      const Reply pong = client.command({"PING"});
      // With requirepass, PING answers NOAUTH: the server is up all the same.
      if (pong.str == "PONG" || pong.isError()) return;
    } catch (const std::exception& error) {
      lastError = error.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redis-server on " + host_ + ":" + std::to_string(port_) + " did not answer PING within " +
                           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(budget).count()) +
                           " s: " + lastError);
}

void RedisProcess::kill() {
  if (external_) throw std::runtime_error("RedisProcess: cannot kill an outside server (DLOCK_TEST_REDIS)");
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisProcess::restart() {
  if (external_) throw std::runtime_error("RedisProcess: cannot restart an outside server (DLOCK_TEST_REDIS)");
  kill();
  // The old socket may linger briefly (redis-server sets SO_REUSEADDR), or an outgoing connection
  // may hold the port for a while: try again until the port can be had, within the start budget.
  const auto deadline = std::chrono::steady_clock::now() + kStartBudget;
  for (;;) {
    try {
      start();
      return;
    } catch (const std::exception&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void RedisProcess::pause() {
  if (external_ || pid_ <= 0) throw std::runtime_error("RedisProcess: nothing to pause");
  ::kill(pid_, SIGSTOP);
}

void RedisProcess::resume() {
  if (external_ || pid_ <= 0) throw std::runtime_error("RedisProcess: nothing to resume");
  ::kill(pid_, SIGCONT);
}

}  // namespace dlock::test
