// SPDX-License-Identifier: Apache-2.0
// Secrets and hostile input: passwords never reach logs, messages or describe(); keys from users
// are data, never commands or Lua.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "LogCapture.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// The close-on-exec flag of every socket of this process connected to `port` on loopback.
std::vector<bool> closeOnExecOfSocketsTo(int port) {
  std::vector<bool> flags;
  DIR* fds = ::opendir("/proc/self/fd");
  REQUIRE(fds != nullptr);
  while (const dirent* entry = ::readdir(fds)) {
    const int fd = std::atoi(entry->d_name);
    if (entry->d_name[0] == '.' || fd == ::dirfd(fds)) continue;
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0 || peer.sin_family != AF_INET) continue;
    if (ntohs(peer.sin_port) != port) continue;
    flags.push_back((::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
  }
  ::closedir(fds);
  return flags;
}

}  // namespace

TEST_SUITE("Security") {
  TEST_CASE("every connection dlock opens is close-on-exec: a fork+exec never inherits one") {
    RedisProcess server;
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    REQUIRE(lock->tryLock("k"));  // a pooled connection
    auto waiter = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    CHECK_FALSE(waiter->tryLock("k", 50ms));  // a release subscription too
    const std::vector<bool> flags = closeOnExecOfSocketsTo(server.port());
    CHECK(flags.size() >= 2);
    for (const bool closeOnExec : flags) CHECK(closeOnExec);
    lock->unlock("k");
  }

  TEST_CASE("no password appears in log output, exception messages or describe()") {
    const std::string secret = "Sup3r-Secret-Passw0rd";
    RedisProcess::Options options;
    options.config = {"requirepass another-password"};
    RedisProcess server(options);
    const std::string address = server.host() + ":" + std::to_string(server.port());
    dlock::test::LogCapture log(spdlog::level::trace);
    std::vector<std::string> messages;
    const auto collect = [&](auto&& action) {
      try {
        action();
      } catch (const std::exception& error) {
        messages.emplace_back(error.what());
      }
    };

    // A wrong password, as a user and as password-only: refused at connect, and at the first call
    // when connecting lazily.
    for (const std::string& uri : {"redis://alice:" + secret + "@" + address, "redis://" + secret + "@" + address,
                                   "redis://:" + secret + "@" + address + "?command_timeout=200ms"}) {
      collect([&] { (void)dlock::connect(uri); });
      auto backend = dlock::connect(uri, dlock::ConnectOptions{true});
      messages.push_back(backend->describe());
      auto lock = dlock::LockBuilder().backend(backend).build();
      collect([&] { (void)lock->tryLock("k"); });
      collect([&] { (void)lock->tryLock("k", 100ms); });
      collect([&] { (void)lock->acquire("k"); });
    }
    // A server that is not there.
    const std::string downUri = "redis://user:" + secret + "@127.0.0.1:" +
                                std::to_string(dlock::test::freeLoopbackPort()) + "?connect_timeout=100ms";
    collect([&] { (void)dlock::connect(downUri); });
    auto down = dlock::connect(downUri + "&lazy_connect=true");
    collect([&] { (void)down->lock("k", "t", 1000ms); });
    // Malformed URIs carrying the password.
    collect([&] { (void)dlock::connect("redis://user:" + secret + "@host:notaport"); });
    collect([&] { (void)dlock::connect("redis://user:" + secret + "@host:1?bogus=1"); });
    collect([&] { (void)dlock::connect("redis+sentinel://h:1/m?sentinel_password=" + secret + "&bogus=1"); });

    REQUIRE(messages.size() >= 14);
    for (const auto& message : messages) CHECK_MESSAGE(message.find(secret) == std::string::npos, message);
    const std::string logged = log.text();
    CHECK_FALSE(logged.empty());  // the failures were logged, so the check below means something
    CHECK(logged.find(secret) == std::string::npos);
  }

  TEST_CASE("keys that look like commands or Lua are stored as data and run nothing") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    client.ok({"SET", "canary", "alive"});
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).build();
    const std::vector<std::string> keys = {
        "') redis.call('FLUSHALL') --",
        "]] redis.call('FLUSHALL') --[[",
        "x\r\nFLUSHALL\r\n",
        "*1\r\n$8\r\nFLUSHALL\r\n",
        "%s%s%s%n",
        "} FLUSHALL {",
    };
    for (const auto& key : keys) {
      REQUIRE(lock->tryLock(key));
      CHECK(client.ok({"GET", "dlock:{" + key + "}"}).str.size() == 32);
      lock->unlock(key);
    }
    CHECK(client.ok({"GET", "canary"}).str == "alive");
    CHECK(client.commandCalls().count("flushall") == 0);
  }
}
