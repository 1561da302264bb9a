// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/RequestIdHolder.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "LeaseState.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock {
namespace {

using KeyHolds = std::map<std::string, RequestIdHolder::Hold, std::less<>>;

// All holds of one thread. Few locks per process, so a vector of (lock id, holds) pairs.
struct ThreadHolds {
  std::vector<std::pair<std::uint64_t, KeyHolds>> locks;
  // The thread that called fork() goes on in the child with a copy of these holds: they are the
  // parent's, so the child forgets them (the parent keeps, renews and releases its own).
  std::uint64_t forkGeneration = detail::forkGeneration();
  // The last erased hold's map node, its key's buffer kept: a thread that locks and unlocks in a
  // loop allocates no node after the first.
  KeyHolds::node_type spare;

  ThreadHolds() = default;
  ThreadHolds(const ThreadHolds&) = delete;
  ThreadHolds& operator=(const ThreadHolds&) = delete;

  // A thread that ends while holding keys can never unlock them: stop renewing, so the
  // leases end at their TTL instead of being kept alive forever. Only a lease still held is
  // reported: one released when its lock was closed or destroyed, or lost, was logged then.
  // The main thread's holds end here at exit(): the program, not a thread, ended.
  ~ThreadHolds() {
    const bool programExit = ::getpid() == static_cast<pid_t>(::syscall(SYS_gettid));
    for (auto& [lockId, holds] : locks) {
      for (auto& [key, hold] : holds) {
        if (!hold.lease->abandon()) continue;
        try {
          detail::logger()->warn("dlock: {} holding {}; its lease ends at its TTL",
                                 programExit ? "the program exited" : "a thread ended", detail::quoteKey(key));
        } catch (...) {  // logging must not throw out of thread exit
        }
      }
    }
  }

  KeyHolds* holdsOf(std::uint64_t lockId) {
    for (auto& [id, holds] : locks) {
      if (id == lockId) return &holds;
    }
    return nullptr;
  }
};

// The one thread-local object (STYLE: thread-local state sits behind one function).
ThreadHolds& threadHolds() {
  static thread_local ThreadHolds holds;
  if (holds.forkGeneration != detail::forkGeneration()) {
    holds.locks.clear();
    holds.forkGeneration = detail::forkGeneration();
  }
  return holds;
}

}  // namespace

RequestIdHolder::Hold* RequestIdHolder::find(std::uint64_t lockId, std::string_view key) {
  KeyHolds* holds = threadHolds().holdsOf(lockId);
  if (holds == nullptr) return nullptr;
  const auto it = holds->find(key);
  return it == holds->end() ? nullptr : &it->second;
}

RequestIdHolder::Hold& RequestIdHolder::insert(std::uint64_t lockId, std::string_view key,
                                               std::shared_ptr<detail::LeaseState> lease) {
  auto& thread = threadHolds();
  KeyHolds* holds = thread.holdsOf(lockId);
  if (holds == nullptr) holds = &thread.locks.emplace_back(lockId, KeyHolds{}).second;
  if (thread.spare.empty()) {
    auto [it, inserted] = holds->try_emplace(std::string(key));
    (void)inserted;
    it->second = Hold{std::move(lease), 1};
    return it->second;
  }
  thread.spare.key().assign(key);
  thread.spare.mapped() = Hold{std::move(lease), 1};
  return holds->insert(std::move(thread.spare)).position->second;
}

void RequestIdHolder::erase(std::uint64_t lockId, std::string_view key) {
  auto& thread = threadHolds();
  KeyHolds* holds = thread.holdsOf(lockId);
  if (holds == nullptr) return;
  const auto it = holds->find(key);
  if (it != holds->end()) {
    KeyHolds::node_type node = holds->extract(it);
    node.mapped().lease.reset();  // the lease ends with its hold, as it did when erased
    thread.spare = std::move(node);
  }
  if (holds->empty()) {
    for (auto lock = thread.locks.begin(); lock != thread.locks.end(); ++lock) {
      if (lock->first == lockId) {
        thread.locks.erase(lock);
        break;
      }
    }
  }
}

std::size_t RequestIdHolder::size(std::uint64_t lockId) {
  const KeyHolds* holds = threadHolds().holdsOf(lockId);
  return holds == nullptr ? 0 : holds->size();
}

}  // namespace dlock
