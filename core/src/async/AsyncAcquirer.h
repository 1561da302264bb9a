// SPDX-License-Identifier: Apache-2.0
// AsyncAcquirer.h — a lock's asynchronous acquisitions (dlock/async.h): pending acquires that hold
// no thread. Each operation moves through these stages, under one mutex:
//
//   Starting ─ cancel callback registered ─▶ Queued ─ a worker takes it ─▶ Running (one try)
//   Running ─ held ─────────────────────────────────────────────────────▶ Done (the Lease)
//           ├ taken, the key not listened to yet: listen ─▶ Queued (the try again)
//           ├ taken, before its deadline ─▶ Parked ─ a release heard, the key's backstop ─▶ Queued
//           ├ taken, past its deadline (or a single try) ───────────────▶ Done (an empty Lease)
//           ├ a ConnectionError, budget left ─▶ Parked ─ its back-off's end ─▶ Queued
//           ├ another error, or an outage past its budget ──────────────▶ Done (the error)
//           └ a cancel or close() came meanwhile: the key it got released ▶ Done (InterruptedError)
//   Starting/Queued/Parked ─ cancel, close() ───────────────────────────▶ Done (InterruptedError)
//   Parked ─ deadline ───────────────────▶ Done (an empty Lease; in an outage, its ConnectionError)
//
// With a queue (AsyncQueue.h: the fair lock), an operation whose first try found the key taken
// holds a place in the server's queue instead of parking on a release watch:
//
//   Join (join or renew the place) ─ the key is the token's: taken (one try) ─────────────▶ Done
//        └ queued ─▶ Parked ─ its grant watch tells ─▶ Take: a hand-off, its claim extended ─▶ Done
//                           │                             └ not ours, or nothing ─▶ Parked
//                           └ waiterLease / 3 ─▶ Join (renewed; finds a hand-off whose message was lost)
//   cancel, close(), deadline, an error ─▶ Leave (the place, passing on a hand-off) ─▶ Done
//
// so the order is one across sync and async waiters, and nothing of a cancelled operation stays
// queued once it completed. A Take cut off left the place (its token is not used again): the
// operation rides the outage out and joins anew with another token.
//
// Tries are the lock's own single tries (acquire with waitTime 0), run on `workers` threads. Each
// key with operations gets one release watch, made once a try found the key taken, which is then
// tried again (so a release between a try and the parking is heard). The one timer thread polls a
// watch without blocking when the watch tells it a release may have come (notifyOnRelease), and
// every `backstop` besides; a watch that cannot tell is polled every `pollSlice`. The timer fires
// deadlines, and re-queues the head of a key's parked
// operations on a release (the backend wakes one waiting process per release) or every `backstop`
// (a holder that died releases nothing). An operation that got a key re-queues the key's next
// parked one at once: its try, finding the key taken, registers the process as a waiter again. Completions run in order on one completion thread.
// Threads start with the first operation: workers + 2, however many are pending.
// Owner: one lock (in a ForkLocal: a forked child gets a new, empty one). Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "AsyncQueue.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/async.h"

namespace dlock::detail {

class AsyncAcquirer final : public AsyncAcquisition {
 public:
  using Clock = std::chrono::steady_clock;
  struct Options {
    unsigned workers = 2;
    std::chrono::milliseconds pollSlice{2};
    std::chrono::milliseconds backstop{1000};
    // How long a wait without a deadline rides out an outage (LockOptions::outageTolerance).
    std::chrono::milliseconds outageTolerance{std::chrono::seconds(30)};
  };

  // `lock` makes the tries and outlives this object; `backend` is the lock's, for release watches.
  // `queue`: the places of a queued primitive (the fair lock), which its waiters hold; null: the
  // waiters hold none (the default lock).
  AsyncAcquirer(ILock& lock, std::shared_ptr<IOperator> backend, Options options,
                std::shared_ptr<AsyncQueue> queue = nullptr);
  AsyncAcquirer(ILock& lock, std::shared_ptr<IOperator> backend) : AsyncAcquirer(lock, std::move(backend), Options{}) {}
  ~AsyncAcquirer() override;

  void start(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
             const CancelToken& cancel, AsyncCallback done) override;
  // Completes every pending operation with InterruptedError (an operation whose try is in flight
  // once the try is back, the key it got released), refuses new ones (completed at once, on the
  // caller's thread), and joins the threads after the last completion ran. Idempotent.
  void close() noexcept;
  // Operations not completed yet.
  [[nodiscard]] std::size_t pending() const;

 private:
  enum class Stage : std::uint8_t { Starting, Queued, Running, Parked, Done };
  // What a worker does for the operation next. Try: the lock's single try. With a queue: Join
  // (join or renew the place; the key ours: take it), Take (told of a hand-off: claim the key if
  // the server says it is the token's), Poll (a grant watch that cannot tell: look at it), Leave
  // (the operation is over: leave the place, then complete).
  enum class Step : std::uint8_t { Try, Join, Take, Poll, Leave };
  struct Operation;
  using OperationPtr = std::shared_ptr<Operation>;
  struct KeyWaiters;
  struct Completion;

  void startThreadsLocked();
  void work();
  void runTimer();
  void runCompletions();
  void attempt(const OperationPtr& op);
  // A Join, Take or Poll step of an operation with a queue place, and what follows it.
  void placeAttempt(const OperationPtr& op);
  void afterPlaceAttempt(const OperationPtr& op, Lease lease, const std::exception_ptr& error, bool tokenLeft);
  // The next grant on `op`'s watch that answers its last join (older ones are dropped unread).
  static Grant freshGrant(Operation& op);
  void leavePlace(const OperationPtr& op);
  // Parks `op` (with a place) until its next renewal, or its grant watch's poll.
  void parkPlacedLocked(const OperationPtr& op);
  // The operation ends with `error` (null: an empty Lease): after leaving its place, if it has one.
  void endLocked(const OperationPtr& op, std::exception_ptr error);
  void requeueLocked(const OperationPtr& op);
  // Told by `op`'s grant watch, the backend's lock held.
  void grantHeard(const std::weak_ptr<Operation>& op) noexcept;
  void ensureWatch(const std::string& key);
  // Asks `watch` to tell the timer of a release; the flag it sets, or nullptr when it cannot.
  std::shared_ptr<std::atomic<bool>> tellTimerOf(IReleaseWatch& watch);
  [[nodiscard]] bool listeningOn(const std::string& key) const;
  void cancelled(std::uint64_t id) noexcept;
  // Polls every watch outside the mutex (`guard` given up meanwhile); drops keys nobody uses.
  void pollWatches(std::unique_lock<std::mutex>& guard);
  void fireDeadlinesLocked(Clock::time_point now);
  // After a ConnectionError: true when the operation waits to try again (OutageRetry's schedule,
  // within its deadline or outageTolerance), as a sync wait rides an outage out.
  bool ridesOutLocked(const OperationPtr& op, const std::exception_ptr& error);
  [[nodiscard]] Clock::time_point nextWakeLocked(Clock::time_point now) const;
  void parkLocked(const OperationPtr& op);
  void wakeHeadLocked(KeyWaiters& waiters);
  void wakeNextLocked(const std::string& key);  // the head of the key's parked ones, if any
  void unparkLocked(const OperationPtr& op);
  void finishLocked(const OperationPtr& op, Lease lease, std::exception_ptr error);
  [[nodiscard]] std::exception_ptr interruptedError(const Operation& op, bool closing) const;
  void joinThreads() noexcept;

  ILock& lock_;
  const std::shared_ptr<IOperator> backend_;
  const Options options_;
  const std::shared_ptr<AsyncQueue> queue_;

  mutable std::mutex mutex_;
  std::condition_variable workReady_;
  std::condition_variable timerWake_;
  std::condition_variable completionReady_;
  std::unordered_map<std::uint64_t, OperationPtr> operations_;      // guarded by mutex_; not Done
  std::deque<OperationPtr> runQueue_;                               // guarded by mutex_; Done ones skipped
  std::map<std::string, KeyWaiters, std::less<>> keys_;             // guarded by mutex_
  std::multimap<Clock::time_point, std::weak_ptr<Operation>> deadlines_;  // guarded by mutex_
  std::multimap<Clock::time_point, std::weak_ptr<Operation>> retries_;    // guarded by mutex_: outages
  std::deque<Completion> completions_;                              // guarded by mutex_
  std::uint64_t lastId_ = 0;                                        // guarded by mutex_
  bool anyHeard_ = false;          // guarded by mutex_: a watch told of a release since the last poll
  bool closed_ = false;            // guarded by mutex_: new operations are refused
  bool stopping_ = false;          // guarded by mutex_: workers and the timer end
  bool completionsEnd_ = false;    // guarded by mutex_: the completion thread ends once drained
  std::vector<std::thread> workers_;  // guarded by mutex_ until stopping_
  std::thread timer_;
  std::thread completer_;
};

}  // namespace dlock::detail
