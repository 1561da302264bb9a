// Fork.h — how dlock objects inherited across fork() become the child's own.
//
//   forkGeneration()       the number of fork()s that led to this process from the first one
//                          that watched (a pthread_atfork child handler adds one); one atomic load
//   watchForks()           registers that handler (once per process) and returns forkGeneration()
//   ForkLocal<T>           a T of this process: in a child, the inherited T is left behind at its
//                          first use (or destruction) there, and a new one is made
//   abandonAfterFork(p)    keeps `p` reachable for ever and never touches it again
//
// fork() copies the parent's memory but only the calling thread. In the child the parent's other
// threads (watchdog, subscriber, node workers) do not exist; a mutex one of them held stays locked,
// a condition variable counts waiters that will never wake (destroying it blocks for ever), what
// a mutex guarded may be half-updated, and the sockets are the parent's connections. None of that
// can be used or even destroyed safely in the child, so it is abandoned: never touched, never
// destroyed, kept reachable so that LeakSanitizer does not call it a leak. It is one object per
// inherited component per fork, never per call.
//
// Header-only and build-only (api/internal is not installed): core and the backends both need it,
// neither may depend on the other (DESIGN.md, "Layers"), and api/ has no compiled code.
// Thread safety: thread-safe.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

namespace dlock::detail {

inline std::atomic<std::uint64_t> forkGenerationCounter{0};

[[nodiscard]] inline std::uint64_t forkGeneration() noexcept {
  return forkGenerationCounter.load(std::memory_order_acquire);
}

// Call before relying on forkGeneration(): in a process that never called it, a fork goes unseen.
inline std::uint64_t watchForks() noexcept {
  // The child handler runs in the child only, before fork() returns there: the parent's
  // generation never changes.
  static const int registered =
      ::pthread_atfork(nullptr, nullptr, [] { forkGenerationCounter.fetch_add(1, std::memory_order_acq_rel); });
  (void)registered;
  return forkGeneration();
}

struct AbandonedAfterFork {
  const void* object;
  AbandonedAfterFork* next;
};

// Everything abandoned in this process; reachable from here, so never reported as leaked.
inline std::atomic<AbandonedAfterFork*> abandonedAfterFork{nullptr};

inline void abandonAfterFork(const void* object) {
  auto* node = new AbandonedAfterFork{object, abandonedAfterFork.load(std::memory_order_relaxed)};
  while (!abandonedAfterFork.compare_exchange_weak(node->next, node, std::memory_order_release,
                                                   std::memory_order_relaxed)) {
  }
}

// A T owned by the process that made it. In a forked child, the first access (or the destructor)
// finds the T made in an earlier generation, abandons it unused, and (for an access) makes a new
// one with the factory. Accessing costs one extra atomic load when nothing was forked.
// Owner: the component holding it. Thread safety: thread-safe, as T is.
template <class T>
class ForkLocal {
 public:
  using Factory = std::function<std::shared_ptr<T>()>;

  // Makes the first T at once, so its constructor's errors reach the caller.
  explicit ForkLocal(Factory make) : make_(std::move(make)) {
    const std::uint64_t generation = watchForks();
    current_.store(new Entry{generation, make_()}, std::memory_order_release);
  }
  ForkLocal(const ForkLocal&) = delete;
  ForkLocal& operator=(const ForkLocal&) = delete;
  ~ForkLocal() {
    Entry* entry = current_.load(std::memory_order_acquire);
    if (entry->generation == forkGeneration()) {
      delete entry;
    } else {
      abandonAfterFork(entry);
    }
  }

  T& operator*() const { return *current().object; }
  T* operator->() const { return current().object.get(); }
  // For holders that must keep this T alive (an operation in flight, a release watch).
  [[nodiscard]] const std::shared_ptr<T>& shared() const { return current().object; }

 private:
  struct Entry {
    std::uint64_t generation;
    std::shared_ptr<T> object;
  };

  Entry& current() const {
    Entry* entry = current_.load(std::memory_order_acquire);
    if (entry->generation == forkGeneration()) return *entry;
    return renew(entry);
  }

  Entry& renew(Entry* inherited) const {
    auto fresh = std::make_unique<Entry>(Entry{forkGeneration(), make_()});
    if (current_.compare_exchange_strong(inherited, fresh.get(), std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
      abandonAfterFork(inherited);
      return *fresh.release();
    }
    return current();  // another thread of the child renewed it first; ours goes unused
  }

  const Factory make_;
  mutable std::atomic<Entry*> current_{nullptr};
};

}  // namespace dlock::detail
