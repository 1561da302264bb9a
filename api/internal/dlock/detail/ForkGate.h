// SPDX-License-Identifier: Apache-2.0
// ForkGate.h — a gate that fork() closes, for work inside a library that is not fork-safe.
//
//   { const ForkGate<Tag>::Shared open; SSL_do_handshake(ssl); }   work a child must not find half done
//
// A child is made with only the forking thread; a lock another thread held inside spdlog's sinks,
// OpenSSL or the C library (its time-zone lock) stays locked there for ever. Threads hold the gate
// shared around such work; a pthread_atfork prepare handler, registered when the gate is made,
// runs Tag::beforeFork() and takes the gate exclusively, so no thread is inside when the child
// is made. Writer-preferring, so a stream of holders cannot hold a fork off for ever. Hold it
// around short CPU-bound steps only, never across a wait, and never take another gate or lock
// that fork() takes while holding it. Make the gate at load (MadeAtLoad, Fork.h).
// Thread safety: thread-safe.
#pragma once

#include <pthread.h>

#if defined(__SANITIZE_THREAD__)
#define DLOCK_FORK_GATE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DLOCK_FORK_GATE_TSAN 1
#endif
#endif
#if defined(DLOCK_FORK_GATE_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace dlock::detail {

template <class Tag>
class ForkGate {
 public:
  static ForkGate& instance() {
    static ForkGate gate;
    return gate;
  }
  ForkGate(const ForkGate&) = delete;
  ForkGate& operator=(const ForkGate&) = delete;

  class Shared {
   public:
    Shared() { (void)::pthread_rwlock_rdlock(&instance().lock_); }
    ~Shared() { (void)::pthread_rwlock_unlock(&instance().lock_); }
    Shared(const Shared&) = delete;
    Shared& operator=(const Shared&) = delete;
  };

 private:
  ForkGate() {
    initialize();
    // Prepare runs in the forking thread; the parent releases what it took. The child makes the
    // gate anew instead: an unlock there would hand the gate to the parent's waiting threads,
    // which the child does not have, and leave it closed to its own.
    (void)::pthread_atfork(
        [] {
          Tag::beforeFork();
          (void)::pthread_rwlock_wrlock(&instance().lock_);
        },
        [] { (void)::pthread_rwlock_unlock(&instance().lock_); }, [] { instance().remakeInChild(); });
  }
  void remakeInChild() {
#if defined(DLOCK_FORK_GATE_TSAN)
    // ThreadSanitizer cannot see a re-initialisation as a release: without this it takes the
    // gate as held for the child's whole life and reports every later lock as an inversion.
    __tsan_mutex_pre_unlock(&lock_, 0);
    __tsan_mutex_post_unlock(&lock_, 0);
#endif
    initialize();
  }
  void initialize() {
    pthread_rwlockattr_t attributes;
    (void)::pthread_rwlockattr_init(&attributes);
    (void)::pthread_rwlockattr_setkind_np(&attributes, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    (void)::pthread_rwlock_init(&lock_, &attributes);
    (void)::pthread_rwlockattr_destroy(&attributes);
  }
  ~ForkGate() = default;  // never destroyed while held: the lock stays valid

  pthread_rwlock_t lock_;
};

}  // namespace dlock::detail
