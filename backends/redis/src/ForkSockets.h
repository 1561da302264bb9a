// SPDX-License-Identifier: Apache-2.0
// ForkSockets.h — the sockets of this process's Redis connections, closed in a forked child.
//
// A child inherits a copy of every socket of its parent. It never uses the parent's connections
// (ForkLocal leaves those objects behind, see dlock/detail/Fork.h), and a pthread_atfork child
// handler closes its copies of their sockets: the server then sees a connection end when the
// parent ends it, not when the last child exits (a subscription would otherwise outlive its
// subscriber), and a connection object the child did touch fails instead of writing to it.
// Closing the child's copy does nothing to the parent's.
// Owner: one Socket. Thread safety: thread-safe.
#pragma once

namespace dlock::detail {

struct ForkSocketList;

class ForkSocket {
 public:
  ForkSocket() = default;
  ForkSocket(const ForkSocket&) = delete;
  ForkSocket& operator=(const ForkSocket&) = delete;
  ~ForkSocket();

  // Closes the socket `fd` and sets `fd` to -1 (so its owner neither closes it again nor uses a
  // number the child may reuse) in any child forked from now on, until this object is destroyed.
  void track(int& fd);
  // Opens a socket into `fd` (::socket(domain, type, 0)) and tracks it as one step: no child can be
  // forked between the two, even while a long connect follows. `fd` is -1 (errno set) on failure.
  void open(int& fd, int domain, int type);

 private:
  friend struct ForkSocketList;
  void link(ForkSocketList& list, int& fd);  // with the list's mutex held
  int* fd_ = nullptr;  // guarded by the list's mutex, as are the links
  ForkSocket* previous_ = nullptr;
  ForkSocket* next_ = nullptr;
};

}  // namespace dlock::detail
