// SPDX-License-Identifier: Apache-2.0
#include "ForkSockets.h"

#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>

#include "dlock/detail/Fork.h"

namespace dlock::detail {

// Every tracked socket of this process. The mutex is taken around fork() (prepare handler), so
// the child finds the list whole and the mutex free.
struct ForkSocketList {
  std::mutex mutex;
  ForkSocket* head = nullptr;  // guarded by mutex
  // The parent's connections, never touched again but kept reachable: the parent's threads that
  // owned them do not exist here, and LeakSanitizer would report them.
  ForkSocket* inherited = nullptr;  // guarded by mutex

  static ForkSocketList& instance() {
    static ForkSocketList* const list = [] {
      auto* created = new ForkSocketList;  // never destroyed: connections may close after static destruction
      (void)::pthread_atfork([] { instance().mutex.lock(); }, [] { instance().mutex.unlock(); },
                             [] { instance().closeInChild(); });
      return created;
    }();
    return *list;
  }

  // In the child, on the only thread there is: every socket here is the parent's.
  void closeInChild() {
    ForkSocket* last = nullptr;
    for (ForkSocket* socket = head; socket != nullptr; socket = socket->next_) {
      if (*socket->fd_ >= 0) (void)::close(*socket->fd_);
      *socket->fd_ = -1;
      socket->fd_ = nullptr;  // forgotten: its destructor (if ever run) does nothing
      last = socket;
    }
    if (last != nullptr) {
      last->next_ = inherited;
      inherited = head;
    }
    head = nullptr;
    mutex.unlock();
  }
};

namespace {

// The list and its fork handlers exist before any fork can matter (MadeAtLoad).
const MadeAtLoad kListMadeAtLoad([] { (void)ForkSocketList::instance(); });

}  // namespace

void ForkSocket::track(int& fd) {
  ForkSocketList& list = ForkSocketList::instance();
  std::lock_guard<std::mutex> guard(list.mutex);
  link(list, fd);
}

// The list's mutex is held across fork() (the prepare handler): a socket opened under it is in the
// list before any child can be made.
void ForkSocket::open(int& fd, int domain, int type) {
  ForkSocketList& list = ForkSocketList::instance();
  std::lock_guard<std::mutex> guard(list.mutex);
  fd = ::socket(domain, type, 0);
  if (fd >= 0) link(list, fd);
}

void ForkSocket::link(ForkSocketList& list, int& fd) {
  fd_ = &fd;
  next_ = list.head;
  if (next_ != nullptr) next_->previous_ = this;
  list.head = this;
}

ForkSocket::~ForkSocket() {
  ForkSocketList& list = ForkSocketList::instance();
  std::lock_guard<std::mutex> guard(list.mutex);
  if (fd_ == nullptr) return;
  if (previous_ != nullptr) {
    previous_->next_ = next_;
  } else {
    list.head = next_;
  }
  if (next_ != nullptr) next_->previous_ = previous_;
}

}  // namespace dlock::detail
