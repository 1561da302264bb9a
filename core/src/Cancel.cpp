// SPDX-License-Identifier: Apache-2.0
// The state behind dlock/Cancel.h: one flag and the callbacks to run when it is set.
#include "dlock/Cancel.h"

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "dlock/detail/Fork.h"

namespace dlock {
namespace detail {

// Owner: shared by a source, its tokens and callbacks. Thread safety: thread-safe.
class CancelState {
 public:
  [[nodiscard]] bool cancelled() const noexcept { return cancelled_.load(std::memory_order_acquire); }

  bool cancel() noexcept {
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return false;
    std::unique_lock<ForkSafeMutex> guard(mutex_);
    while (!callbacks_.empty()) {
      auto first = callbacks_.begin();
      Entry entry = std::move(first->second);
      running_ = first->first;
      callbacks_.erase(first);
      if (entry.generation != forkGeneration()) continue;  // a parent thread's wait: not in this process
      runner_ = std::this_thread::get_id();
      runningGeneration_ = entry.generation;
      guard.unlock();  // never run a callback under the mutex: it may register or deregister
      entry.callback();
      guard.lock();
    }
    running_ = 0;
    return true;
  }

  // The callback's id; 0 when it ran at once (the state was cancelled already).
  std::uint64_t add(std::function<void()>& callback) {
    {
      std::lock_guard<ForkSafeMutex> guard(mutex_);
      if (!cancelled()) {
        const std::uint64_t id = ++lastId_;
        callbacks_.emplace(id, Entry{std::move(callback), forkGeneration()});
        return id;
      }
    }
    callback();
    return 0;
  }

  void remove(std::uint64_t id) noexcept {
    while (true) {
      {
        std::lock_guard<ForkSafeMutex> guard(mutex_);
        if (callbacks_.erase(id) > 0 || running_ != id) return;
        // Running now: wait for it, unless on its own thread, or a parent's thread (not here).
        if (runner_ == std::this_thread::get_id() || runningGeneration_ != forkGeneration()) return;
      }
      std::this_thread::yield();  // a ForkSafeMutex is never waited on; a callback is short
    }
  }

 private:
  struct Entry {
    std::function<void()> callback;
    std::uint64_t generation;  // the process (forkGeneration) that registered it
  };

  std::atomic<bool> cancelled_{false};
  mutable ForkSafeMutex mutex_;
  std::map<std::uint64_t, Entry> callbacks_;  // guarded by mutex_; in registration order
  std::uint64_t lastId_ = 0;                  // guarded by mutex_
  std::uint64_t running_ = 0;                 // guarded by mutex_; the callback running now
  std::thread::id runner_;                    // guarded by mutex_
  std::uint64_t runningGeneration_ = 0;       // guarded by mutex_
};

}  // namespace detail

bool CancelToken::cancelRequested() const noexcept { return state_ != nullptr && state_->cancelled(); }

CancelSource::CancelSource() : state_(std::make_shared<detail::CancelState>()) {}

bool CancelSource::requestCancel() noexcept { return state_->cancel(); }

bool CancelSource::cancelRequested() const noexcept { return state_->cancelled(); }

CancelCallback::CancelCallback(const CancelToken& token, std::function<void()> callback) : state_(token.state_) {
  if (state_ != nullptr) id_ = state_->add(callback);
}

CancelCallback::~CancelCallback() {
  if (id_ != 0) state_->remove(id_);
}

}  // namespace dlock
