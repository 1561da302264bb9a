// SPDX-License-Identifier: Apache-2.0
// A child forked while a connection is still connecting does not keep that socket open: the
// socket is tracked for fork from its creation, not from the end of its connect.
#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "redis/src/Connection.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"

using namespace std::chrono_literals;

namespace {

// A loopback listener whose accept queue is full: a further connect stays in SYN_SENT.
struct FullListener {
  int listener = -1;
  int filler = -1;
  int port = 0;

  FullListener() {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    REQUIRE(::listen(listener, 0) == 0);  // a queue of one
    port = ntohs(address.sin_port);
    filler = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::connect(filler, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);  // never accepted
  }
  FullListener(const FullListener&) = delete;
  FullListener& operator=(const FullListener&) = delete;
  ~FullListener() {
    ::close(filler);
    ::close(listener);
  }
};

// The inode of a loopback TCP socket in SYN_SENT towards `port`, from /proc/net/tcp; 0 if none.
unsigned long synSentTo(int port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the header
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    unsigned long inode = 0;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
    const auto colon = remote.find(':');
    if (state == "02" && colon != std::string::npos && std::stoi(remote.substr(colon + 1), nullptr, 16) == port) {
      return inode;
    }
  }
  return 0;
}

// In a forked child: 1 if it holds a descriptor of socket `inode`, else 0 (its exit status).
int holdsSocket(unsigned long inode) {
  const std::string wanted = "socket:[" + std::to_string(inode) + "]";
  char target[64];
  for (int fd = 0; fd < 1024; ++fd) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t length = ::readlink(path.c_str(), target, sizeof target - 1);
    if (length > 0 && std::string(target, static_cast<std::size_t>(length)) == wanted) return 1;
  }
  return 0;
}

}  // namespace

TEST_SUITE("ForkConnect") {
  TEST_CASE("a child forked during a long connect does not hold the connecting socket") {
    FullListener full;
    dlock::ConnectionOptions options;
    options.port = full.port;
    options.connectTimeout = 3s;
    std::thread connecting([&] {
      CHECK_THROWS_AS(dlock::detail::Connection connection(options), dlock::ConnectionError);
    });
    unsigned long inode = 0;
    REQUIRE(dlock::test::eventually([&] { return (inode = synSentTo(full.port)) != 0; }, 2s));
    const pid_t child = ::fork();
    if (child == 0) ::_exit(holdsSocket(inode));
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status));
    CHECK_MESSAGE(WEXITSTATUS(status) == 0, "the child kept the parent's connecting socket");
    connecting.join();
  }
}
