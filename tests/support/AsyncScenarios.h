// SPDX-License-Identifier: Apache-2.0
// AsyncScenarios.h — checks of acquireAsync (dlock/async.h) run on the memory backend and on Redis:
// many pending acquires on few keys with a constant thread count, each completing exactly once,
// half cancelled at random leaving no hold behind.
#pragma once

#include <doctest/doctest.h>

#include <dirent.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "dlock/Cancel.h"
#include "dlock/ILock.h"
#include "dlock/LockError.h"
#include "dlock/async.h"

namespace dlock::test {

// The threads of this process now (/proc/self/task).
inline std::size_t threadCount() {
  std::size_t count = 0;
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return 0;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(tasks);
  return count;
}

// Closes a lock when the scope ends, so no completion of it outlives the scope's callbacks' state
// (a failed REQUIRE leaves the scope with acquires pending).
class ClosesAtExit {
 public:
  explicit ClosesAtExit(ILock& lock) : lock_(lock) {}
  ClosesAtExit(const ClosesAtExit&) = delete;
  ClosesAtExit& operator=(const ClosesAtExit&) = delete;
  ~ClosesAtExit() { lock_.close(); }

 private:
  ILock& lock_;
};

// Counts completions and waits for a number of them.
class Completions {
 public:
  void record(bool held, bool interrupted, bool other) {
    std::lock_guard<std::mutex> guard(mutex_);
    ++done_;
    held_ += held ? 1 : 0;
    interrupted_ += interrupted ? 1 : 0;
    other_ += other ? 1 : 0;
    changed_.notify_all();
  }
  // True when `count` completions came within `budget`.
  bool waitFor(std::size_t count, std::chrono::milliseconds budget) {
    std::unique_lock<std::mutex> guard(mutex_);
    return changed_.wait_for(guard, budget, [&] { return done_ >= count; });
  }
  std::size_t done() const { std::lock_guard<std::mutex> g(mutex_); return done_; }
  std::size_t held() const { std::lock_guard<std::mutex> g(mutex_); return held_; }
  std::size_t interrupted() const { std::lock_guard<std::mutex> g(mutex_); return interrupted_; }
  std::size_t other() const { std::lock_guard<std::mutex> g(mutex_); return other_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t done_ = 0, held_ = 0, interrupted_ = 0, other_ = 0;
};

// `pending` acquires over `keys` keys held by `holder`: the thread count stays what it was before
// them, half are cancelled at random, the holders release, and each operation completes once
// (the others with their lease, released at once so the next of the key gets it). Afterwards
// every key is free for `lock`.
inline void checkManyPendingAcquires(ILock& lock, ILock& holder, int pending, int keys,
                                     std::chrono::milliseconds budget) {
  auto keyOf = [](int i) { return "async:" + std::to_string(i); };
  std::vector<Lease> holds;
  for (int k = 0; k < keys; ++k) {
    holds.push_back(holder.acquire(keyOf(k), AcquireOptions{std::chrono::milliseconds(0), {}, {}}));
    REQUIRE(holds.back());
  }
  {
    // One pending acquire completed first, so that every thread the lock and its backend start
    // once (the async pool, the watchdog, a subscriber) runs before counting.
    // The wait that times out has listened (the key stays taken); the next acquire holds a lease.
    Lease warmUp = holder.acquire("async:warm-up", AcquireOptions{std::chrono::milliseconds(0), {}, {}});
    REQUIRE(warmUp);
    REQUIRE_FALSE(lock.acquireAsync("async:warm-up", AcquireOptions{std::chrono::milliseconds(50), {}, {}}).get());
    warmUp.release();
    REQUIRE(lock.acquireAsync("async:warm-up").get());
  }
  const std::size_t threadsBefore = threadCount();
  Completions completions;
  std::vector<std::atomic<int>> calls(static_cast<std::size_t>(pending));
  std::vector<CancelSource> cancels(static_cast<std::size_t>(pending));
  const ClosesAtExit closing(lock);
  for (int i = 0; i < pending; ++i) {
    AcquireOptions options;
    options.cancel = cancels[static_cast<std::size_t>(i)].token();
    lock.acquireAsync(keyOf(i % keys), options, [&completions, &calls, i](Lease lease, std::exception_ptr error) {
      calls[static_cast<std::size_t>(i)].fetch_add(1);
      bool interrupted = false, other = false;
      if (error) {
        try {
          std::rethrow_exception(error);
        } catch (const InterruptedError&) {
          interrupted = true;
        } catch (...) {
          other = true;
        }
      }
      const bool held = static_cast<bool>(lease);
      lease = Lease();  // released before it counts: the key's next pending acquire hears it
      completions.record(held, interrupted, other);
    });
  }
  CHECK(threadCount() == threadsBefore);
  CHECK(completions.done() == 0);

  std::mt19937 random(20261202);
  std::vector<int> order(static_cast<std::size_t>(pending));
  for (int i = 0; i < pending; ++i) order[static_cast<std::size_t>(i)] = i;
  std::shuffle(order.begin(), order.end(), random);
  const auto cancelled = static_cast<std::size_t>(pending / 2);
  for (std::size_t i = 0; i < cancelled; ++i) cancels[static_cast<std::size_t>(order[i])].requestCancel();
  REQUIRE(completions.waitFor(cancelled, budget));
  CHECK(completions.interrupted() == cancelled);
  CHECK(completions.held() == 0);
  CHECK(threadCount() == threadsBefore);

  holds.clear();  // every key released: its pending acquires get it one after another
  REQUIRE(completions.waitFor(static_cast<std::size_t>(pending), budget));
  CHECK(completions.held() == static_cast<std::size_t>(pending) - cancelled);
  CHECK(completions.other() == 0);
  for (const auto& count : calls) CHECK(count.load() == 1);
  CHECK(threadCount() == threadsBefore);
  for (int k = 0; k < keys; ++k) {
    Lease free = lock.acquire(keyOf(k), AcquireOptions{std::chrono::milliseconds(0), {}, {}});
    CHECK(free);
  }
}

}  // namespace dlock::test
