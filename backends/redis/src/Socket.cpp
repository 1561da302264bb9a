// SPDX-License-Identifier: Apache-2.0
#include "Socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "Errors.h"
#include "HostResolver.h"
#include "dlock/LockError.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;

// How long a socket wait inside a cancellable wait polls before it looks at the cancel again.
constexpr int kCancelSliceMs = 2;

int remainingMs(Steady::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Steady::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// A non-blocking connect to `address`, finished by `deadline`; the connected socket, or null with
// `error` set (ETIMEDOUT when the deadline passed). The socket is fork-tracked from its creation:
// a child forked during a long connect closes its copy too.
std::unique_ptr<Socket> connectTo(int family, const sockaddr* address, socklen_t length, Steady::time_point deadline,
                                  int& error) {
  auto socket = std::make_unique<Socket>(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK);
  const int fd = socket->fd();
  if (fd < 0) {
    error = errno;
    return nullptr;
  }
  if (::connect(fd, address, length) != 0 && errno != EINPROGRESS) {
    error = errno;
    return nullptr;
  }
  pollfd pending{fd, POLLOUT, 0};
  int ready = 0;
  do {
    ready = ::poll(&pending, 1, remainingMs(deadline));
  } while (ready < 0 && errno == EINTR);
  socklen_t size = sizeof error;
  error = 0;
  if (ready == 0) {
    error = ETIMEDOUT;
  } else if (ready < 0) {
    error = errno;
  } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) != 0) {
    error = errno;
  }
  if (error != 0) return nullptr;
  return socket;
}

void setOption(int fd, int level, int name, int value) { (void)::setsockopt(fd, level, name, &value, sizeof value); }

std::unique_ptr<Socket> connectUnix(const ConnectionOptions& options, Steady::time_point deadline) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  // The kernel reads the path up to a NUL (and one at the start names the abstract namespace).
  if (options.unixSocket.find('\0') != std::string::npos) {
    throw ConfigError("dlock: the Unix socket path holds a NUL byte");
  }
  if (options.unixSocket.size() >= sizeof address.sun_path) {
    throw ConfigError("dlock: the Unix socket path '" + options.unixSocket + "' is longer than " +
                      std::to_string(sizeof address.sun_path - 1) + " bytes");
  }
  std::memcpy(address.sun_path, options.unixSocket.data(), options.unixSocket.size());
  int error = 0;
  auto socket = connectTo(AF_UNIX, reinterpret_cast<const sockaddr*>(&address), sizeof address, deadline, error);
  if (!socket) throwSystemError(error, "connect to " + options.unixSocket);
  return socket;
}

std::unique_ptr<Socket> connectTcp(const ConnectionOptions& options, Steady::time_point deadline) {
  // getaddrinfo reads the name up to a NUL: "good\0.evil" would resolve "good".
  if (options.host.find('\0') != std::string::npos) throw ConfigError("dlock: the host name holds a NUL byte");
  const ResolvedAddresses addresses = resolveHost(options.host, options.port, deadline, options.address());
  int error = EHOSTUNREACH;  // if the name has no address of a stream socket's family
  for (const addrinfo* each = addresses.get(); each != nullptr; each = each->ai_next) {
    auto socket = connectTo(each->ai_family, each->ai_addr, each->ai_addrlen, deadline, error);
    if (socket) {
      const int fd = socket->fd();
      setOption(fd, IPPROTO_TCP, TCP_NODELAY, 1);
      if (options.keepAlive) {
        // As hiredis's redisKeepAlive: probes after 15 s idle, every 5 s, 3 of them.
        setOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
        setOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, 15);
        setOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, 5);
        setOption(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
      }
      return socket;
    }
    if (error == ETIMEDOUT) break;  // the one connect timeout is spent
  }
  throwSystemError(error, "connect to " + options.address());
}

}  // namespace

std::unique_ptr<Socket> Socket::connect(const ConnectionOptions& options, Steady::time_point deadline) {
  return options.unixSocket.empty() ? connectTcp(options, deadline) : connectUnix(options, deadline);
}

Socket::Socket(int fd) : fd_{fd} { forkSocket_.track(fd_.value); }

Socket::Socket(int domain, int type) : fd_{-1} { forkSocket_.open(fd_.value, domain, type); }

Socket::~Socket() = default;

Socket::OwnedFd::~OwnedFd() {
  if (value >= 0) ::close(value);
}

bool waitReady(int fd, short events, Steady::time_point deadline, const char* what, const std::string& address) {
  if (fd < 0) throwForkedError(std::string(what) + " " + address);
  pollfd socket{fd, events, 0};
  // Inside a wait (Wakeup.h), in slices, so that its cancel ends a call in flight within one: the
  // reply, if it comes, is not read, and the connection is closed (its outcome is in doubt; a
  // script that changes a hold refuses to run late, Scripts.h).
  const bool cancellable = Wakeup::inScope();
  while (true) {
    if (cancellable && Wakeup::woken()) {
      throw InterruptedError("dlock: " + std::string(what) + " " + address + ": the wait was cancelled");
    }
    const int left = remainingMs(deadline);
    const int ready = ::poll(&socket, 1, cancellable ? std::min(left, kCancelSliceMs) : left);
    if (ready > 0) return true;
    if (ready == 0 && (!cancellable || left <= kCancelSliceMs)) return false;
    if (ready < 0 && errno != EINTR) throwSystemError(errno, std::string(what) + " " + address);
  }
}

}  // namespace dlock::detail
