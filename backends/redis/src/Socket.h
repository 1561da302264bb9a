// SPDX-License-Identifier: Apache-2.0
// Socket.h — a connected stream socket to one Redis server, opened by dlock itself: TCP (each
// address of the host in turn) or a Unix socket; close-on-exec from creation (no fork+exec
// window), non-blocking, connected within a deadline, TCP_NODELAY and keep-alive on TCP. A forked
// child closes its copy (ForkSockets.h).
// Owner: one Transport. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ForkSockets.h"
#include "dlock/common/RedisOptions.h"

namespace dlock::detail {

class Socket {
 public:
  // Connected by `deadline`, else ConnectionError naming the address and the cause.
  static std::unique_ptr<Socket> connect(const ConnectionOptions& options,
                                         std::chrono::steady_clock::time_point deadline);

  explicit Socket(int fd);
  // A new socket (::socket(domain, type, 0)), tracked for fork from its creation; fd() < 0 (errno
  // set) when it could not be made.
  Socket(int domain, int type);
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  // -1 in a forked child.
  [[nodiscard]] int fd() const noexcept { return fd_.value; }

 private:
  struct OwnedFd {
    int value;
    OwnedFd(const OwnedFd&) = delete;
    OwnedFd& operator=(const OwnedFd&) = delete;
    ~OwnedFd();
  };
  OwnedFd fd_;
  ForkSocket forkSocket_;  // after fd_: untracked before the fd is closed
};

// Waits until `fd` is ready for `events` or `deadline` passes; false on timeout. ConnectionError
// ("<what> <address>: ...") when poll() fails or the socket was closed in a forked child (fd < 0).
bool waitReady(int fd, short events, std::chrono::steady_clock::time_point deadline, const char* what,
               const std::string& address);

}  // namespace dlock::detail
