// SPDX-License-Identifier: Apache-2.0
// Fork.h — how dlock objects inherited across fork() become the child's own.
//
//   forkGeneration()       the number of fork()s that led to this process (a pthread_atfork
//                          child handler registered at load adds one); one atomic load
//   ForkLocal<T>           a T of this process: in a child, the inherited T is left behind at its
//                          first use (or destruction) there, and a new one is made
//   abandonAfterFork(p)    keeps `p` reachable for ever and never touches it again
//   ForkSafeMutex          a leaf mutex that fork() never catches held: prepare/parent/child
//                          handlers take and give back every one, so a child may use what it guards
//   MadeAtLoad             runs one-time initialisation while the program loads, before any fork
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
#include <mutex>
#include <utility>

namespace dlock::detail {

inline std::atomic<std::uint64_t> forkGenerationCounter{0};

[[nodiscard]] inline std::uint64_t forkGeneration() noexcept {
  return forkGenerationCounter.load(std::memory_order_acquire);
}

// Runs `make` while the program (or the shared library) loads, before main() and before any
// thread of the application could fork. For one-time initialisation behind a function-local
// static or std::call_once on a path a forked child takes: a child forked while a parent thread
// is inside it would wait for ever on its guard, taken by a thread the child does not have.
// Keep the static in its function (any static initialiser may call it first, in any order) and
// make it here too, so that after load its guard is never taken again:
//   const MadeAtLoad kScriptsMadeAtLoad([] { (void)acquireScript(); });
struct MadeAtLoad {
  template <class Make>
  explicit MadeAtLoad(Make make) {
    make();
  }
};

// The child handler runs in the child only, before fork() returns there: the parent's
// generation never changes. Registered at load (MadeAtLoad's reason), in every process.
inline const int forkGenerationWatched =
    ::pthread_atfork(nullptr, nullptr, [] { forkGenerationCounter.fetch_add(1, std::memory_order_acq_rel); });

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
    current_.store(new Entry{forkGeneration(), make_()}, std::memory_order_release);
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

class ForkSafeMutex;

// Every ForkSafeMutex of the process. Constant-initialised (no guard for a child to find taken)
// and trivially destroyed (a fork at exit still finds it).
struct ForkSafeMutexRegistry {
  std::mutex mutex;               // held from prepare to parent/child: no mutex is made meanwhile
  ForkSafeMutex* first = nullptr;  // guarded by mutex
};
inline ForkSafeMutexRegistry forkSafeMutexes;

// A mutex for state a forked child must go on using (a lock's lost handler, which the child's new
// watchdog inherits): a pthread_atfork prepare handler locks every ForkSafeMutex of the process,
// the parent and child handlers unlock them, so the child never finds one held by a thread it does
// not have. Only for leaf mutexes, held briefly: never wait, take another ForkSafeMutex, or make or
// destroy one while holding it (fork() would wait for it, and it for fork()).
// Owner: the object it guards. Thread safety: thread-safe (a Lockable).
class ForkSafeMutex {
 public:
  ForkSafeMutex() {
    Registry& all = registry();
    std::lock_guard<std::mutex> guard(all.mutex);
    next_ = all.first;
    if (next_ != nullptr) next_->previous_ = this;
    all.first = this;
  }
  ForkSafeMutex(const ForkSafeMutex&) = delete;
  ForkSafeMutex& operator=(const ForkSafeMutex&) = delete;
  ~ForkSafeMutex() {
    Registry& all = registry();
    std::lock_guard<std::mutex> guard(all.mutex);
    if (previous_ != nullptr) previous_->next_ = next_;
    if (next_ != nullptr) next_->previous_ = previous_;
    if (all.first == this) all.first = next_;
  }

  void lock() { mutex_.lock(); }
  void unlock() { mutex_.unlock(); }
  bool try_lock() { return mutex_.try_lock(); }  // NOLINT(readability-identifier-naming)

 private:
  using Registry = ForkSafeMutexRegistry;
  static Registry& registry() { return forkSafeMutexes; }
  static void lockAll() {
    Registry& all = registry();
    all.mutex.lock();
    for (ForkSafeMutex* each = all.first; each != nullptr; each = each->next_) each->mutex_.lock();
  }
  static void unlockAll() {  // in the parent, and in the child (the forking thread holds them all)
    Registry& all = registry();
    for (ForkSafeMutex* each = all.first; each != nullptr; each = each->next_) each->mutex_.unlock();
    all.mutex.unlock();
  }

  // Registered at load, before any ForkSafeMutex exists (MadeAtLoad's reason).
  static inline const int handlers_ = ::pthread_atfork(&lockAll, &unlockAll, &unlockAll);

  std::mutex mutex_;
  ForkSafeMutex* previous_ = nullptr;  // guarded by the registry's mutex
  ForkSafeMutex* next_ = nullptr;      // guarded by the registry's mutex
};

}  // namespace dlock::detail
