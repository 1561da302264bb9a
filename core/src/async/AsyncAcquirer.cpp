// SPDX-License-Identifier: Apache-2.0
#include "AsyncAcquirer.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "dlock/Validation.h"
#include "dlock/core/Token.h"
#include "dlock/detail/Backoff.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using std::chrono::milliseconds;

struct AsyncAcquirer::Operation {
  std::uint64_t id = 0;
  std::string key;
  Deadline deadline;
  std::optional<milliseconds> leaseTime;
  CancelToken cancel;
  AsyncCallback done;
  Stage stage = Stage::Starting;
  bool interrupted = false;  // a cancel or close() came while Running
  bool closing = false;      // ... and it was close()
  bool woken = false;        // queued from the head of its key's parked ones: parks there again
  std::optional<Backoff> outage;  // riding out an outage (OutageRetry's 10 ms doubling to 500 ms)
  Clock::time_point outageEnds;   // ... until then: the deadline, or outageTolerance from its start
  std::exception_ptr outageError; // ... the last ConnectionError, what a deadline then completes with
  std::unique_ptr<CancelCallback> onCancel;  // written before Queued; destroyed on the completion thread
  // With a queue (read and written by the worker running it, or under the mutex while not running):
  Step step = Step::Try;
  std::string token;          // its place's
  bool placed = false;        // a join was sent for `token`: leave before completing
  bool grantHeard = false;    // told of a hand-off while running: take next
  std::unique_ptr<IGrantWatch> grants;  // moved to its Completion: destroyed unlocked (it calls back)
  bool grantsTell = false;    // `grants` tells of a hand-off (else Poll steps look)
  Clock::time_point renewAt;  // the place's next renewal (a Join)
  std::int64_t lastJoinMillis = 0;  // the backend's clock at the last join: older grants answered earlier ones
  std::exception_ptr afterLeave;  // what a Leave step completes with (null: an empty Lease)
};

struct AsyncAcquirer::KeyWaiters {
  std::unique_ptr<IReleaseWatch> watch;  // replaced only while null; destroyed only by the timer
  // Set by the watch when it may have heard a release (IReleaseWatch::notifyOnRelease); null for
  // a watch that cannot tell, polled every pollSlice instead.
  std::shared_ptr<std::atomic<bool>> heard;
  Clock::time_point pollAt;              // a watch that tells is polled anyway at this time
  bool watchMade = false;                // a watch exists or is being made
  bool listening = false;                // a watch was asked for: tries from now on are heard
  std::deque<OperationPtr> parked;       // oldest first
  unsigned users = 0;                    // operations of this key not Done
  bool releaseHeard = false;             // heard with nobody parked: the next to park tries again
  Clock::time_point backstopAt;
};

struct AsyncAcquirer::Completion {
  OperationPtr op;
  Lease lease;
  std::exception_ptr error;
  std::unique_ptr<IGrantWatch> grants;
};

AsyncAcquirer::AsyncAcquirer(ILock& lock, std::shared_ptr<IOperator> backend, Options options,
                             std::shared_ptr<AsyncQueue> queue)
    : lock_(lock), backend_(std::move(backend)), options_(options), queue_(std::move(queue)) {}

AsyncAcquirer::~AsyncAcquirer() {
  close();
  joinThreads();
}

void AsyncAcquirer::start(std::string_view key, Deadline deadline, std::optional<milliseconds> leaseTime,
                          const CancelToken& cancel, AsyncCallback done) {
  auto op = std::make_shared<Operation>();
  op->key = std::string(key);
  op->deadline = deadline;
  op->leaseTime = leaseTime;
  op->cancel = cancel;
  op->done = std::move(done);
  {
    std::unique_lock<std::mutex> guard(mutex_);
    op->id = ++lastId_;
    if (closed_ || cancel.cancelRequested()) {  // nothing sent; completed here, the threads may be gone
      const bool closed = closed_;
      guard.unlock();
      op->done(Lease(), interruptedError(*op, closed));
      return;
    }
    startThreadsLocked();
    operations_.emplace(op->id, op);
    ++keys_[op->key].users;
    if (deadline != Deadline::min() && deadline != Deadline::max()) {
      deadlines_.emplace(deadline, op);
      timerWake_.notify_one();
    }
  }
  // Registered outside the mutex: a cancel made meanwhile runs it at once, here.
  std::unique_ptr<CancelCallback> onCancel;
  if (cancel.cancellable()) onCancel = std::make_unique<CancelCallback>(cancel, [this, id = op->id] { cancelled(id); });
  std::lock_guard<std::mutex> guard(mutex_);
  if (op->stage != Stage::Starting) return;  // cancelled or closed already; onCancel goes here, unlocked
  op->onCancel = std::move(onCancel);
  op->stage = Stage::Queued;
  runQueue_.push_back(op);
  workReady_.notify_one();
}

void AsyncAcquirer::startThreadsLocked() {
  if (completer_.joinable()) return;
  completer_ = std::thread([this] { runCompletions(); });
  timer_ = std::thread([this] { runTimer(); });
  for (unsigned i = 0; i < std::max(1U, options_.workers); ++i) workers_.emplace_back([this] { work(); });
}

void AsyncAcquirer::work() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (true) {
    workReady_.wait(guard, [this] { return stopping_ || !runQueue_.empty(); });
    if (runQueue_.empty()) return;  // stopping, and every operation was completed by close()
    OperationPtr op = std::move(runQueue_.front());
    runQueue_.pop_front();
    if (op->stage != Stage::Queued) continue;  // completed while queued
    op->stage = Stage::Running;
    guard.unlock();
    attempt(op);
    guard.lock();
  }
}

void AsyncAcquirer::attempt(const OperationPtr& op) {
  if (op->step == Step::Leave) return leavePlace(op);
  if (op->step != Step::Try) return placeAttempt(op);
  // A first try is made before listening (an uncontended acquire subscribes to nothing); one that
  // finds the key taken listens, then tries again, so a release between them is heard.
  const bool listening = op->deadline == Deadline::min() || listeningOn(op->key);
  Lease lease;
  std::exception_ptr error;
  try {
    lease = lock_.acquire(op->key, AcquireOptions{milliseconds(0), op->leaseTime, op->cancel});
  } catch (...) {
    error = std::current_exception();
  }
  std::unique_lock<std::mutex> guard(mutex_);
  if (!error) {  // answered: a later outage gets a budget of its own
    op->outage.reset();
    op->outageError = nullptr;
  }
  if (op->interrupted) {
    // A key granted as the cancel (or close()) came is given back before the operation completes.
    const bool closing = op->closing;
    guard.unlock();
    lease = Lease();
    guard.lock();
    finishLocked(op, Lease(), interruptedError(*op, closing));
  } else if (error && ridesOutLocked(op, error)) {
    parkLocked(op);  // tried again at its back-off's end (retries_), or on a release
  } else if (error || lease || op->deadline == Deadline::min() || Clock::now() >= op->deadline) {
    // The next parked one of a key we got tries at once: finding it taken registers this process
    // as a waiter again (the backend wakes a waiter only once per registration), as the head of
    // the sync waiters' process queue does.
    if (lease) wakeNextLocked(op->key);
    finishLocked(op, std::move(lease), error);  // held, failed, or timed out (an empty Lease)
  } else if (queue_ != nullptr) {
    op->step = Step::Join;  // taken: wait in the server's queue, as a sync waiter of the lock does
    requeueLocked(op);
  } else if (!listening) {
    guard.unlock();
    ensureWatch(op->key);
    guard.lock();
    if (op->interrupted) {
      finishLocked(op, Lease(), interruptedError(*op, op->closing));
    } else {
      op->stage = Stage::Queued;  // the try again, now listening
      runQueue_.push_back(op);
      workReady_.notify_one();
    }
  } else {
    parkLocked(op);
  }
}

void AsyncAcquirer::placeAttempt(const OperationPtr& op) {
  Lease lease;
  std::exception_ptr error;
  bool tokenLeft = false;  // a take() that threw left the place: the token is not used again
  try {
    // Not past the operation's deadline, whatever the server or the link does: a call cut off
    // there may have landed, so the place is left (Leave) before the operation completes.
    const CallBudget budget(op->deadline == Deadline::min() ? Deadline::max() : op->deadline);
    bool ask = op->step == Step::Join;
    if (op->step != Step::Join) {
      // Told of (Take), or looking for (Poll), a hand-off: one the server then confirms is a Lease;
      // a possible miss is asked about (a join); nothing heard: parked again.
      const Grant grant = freshGrant(*op);
      if (grant.kind == Grant::Kind::Granted) lease = queue_->claim(op->key, op->token, grant, op->leaseTime);
      ask = grant.kind == Grant::Kind::Recheck;
    }
    if (ask) {
      if (op->token.empty()) op->token = generateToken();
      if (op->grants == nullptr) {
        // Listening before the join, so a hand-off right after it is heard.
        op->grants = queue_->watch(op->key, op->token);
        op->grantsTell = op->grants->notifyOnGrant([this, weak = std::weak_ptr<Operation>(op)] { grantHeard(weak); });
      } else {
        (void)op->grants->waitForGrant(milliseconds(0));  // follows the key to another node; the join asks anyway
      }
      op->placed = true;  // from the send on: a join cut off may have queued the token
      op->renewAt = Clock::now() + queue_->renewal();
      const FairAcquireResult joined = queue_->join(op->key, op->token, op->leaseTime);
      op->lastJoinMillis = joined.backendMillis;
      if (joined.acquired) {
        tokenLeft = true;
        lease = queue_->take(op->key, op->token, op->leaseTime, op->cancel);
        tokenLeft = false;
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  afterPlaceAttempt(op, std::move(lease), error, tokenLeft);
}

Grant AsyncAcquirer::freshGrant(Operation& op) {
  Grant grant = op.grants->waitForGrant(milliseconds(0));
  while (grant.kind == Grant::Kind::Granted && grant.backendMillis < op.lastJoinMillis) {
    grant = op.grants->waitForGrant(milliseconds(0));  // answered an earlier join: dropped (GrantClaim.h)
  }
  return grant;
}

void AsyncAcquirer::afterPlaceAttempt(const OperationPtr& op, Lease lease, const std::exception_ptr& error,
                                      bool tokenLeft) {
  std::unique_lock<std::mutex> guard(mutex_);
  if (!error) {
    op->outage.reset();
    op->outageError = nullptr;
  }
  if (lease) op->placed = false;  // the place became the hold
  if (op->interrupted) {
    const bool closing = op->closing;
    guard.unlock();
    lease = Lease();  // a key granted as the cancel came is given back before the operation completes
    guard.lock();
    endLocked(op, interruptedError(*op, closing));
  } else if (lease) {
    finishLocked(op, std::move(lease), nullptr);
  } else if (error && ridesOutLocked(op, error)) {
    // A take cut off left the place (its token is not used again): join anew with another.
    if (tokenLeft) {
      op->token.clear();
      op->placed = false;
      std::unique_ptr<IGrantWatch> old = std::move(op->grants);
      guard.unlock();
      old.reset();  // unlocked: a watch calls back under the backend's lock
      guard.lock();
    }
    op->step = Step::Join;
    op->stage = Stage::Parked;  // tried again at its back-off's end (retries_)
    if (op->interrupted) endLocked(op, interruptedError(*op, op->closing));
  } else if (error) {
    endLocked(op, error);
  } else if (op->deadline == Deadline::min() || Clock::now() >= op->deadline) {
    endLocked(op, nullptr);  // timed out: an empty Lease, once the place is left
  } else if (op->grantHeard) {
    op->grantHeard = false;
    op->step = Step::Take;
    requeueLocked(op);
  } else {
    parkPlacedLocked(op);
  }
}

void AsyncAcquirer::parkPlacedLocked(const OperationPtr& op) {
  const auto now = Clock::now();
  op->stage = Stage::Parked;
  if (op->grantsTell || now >= op->renewAt) {
    op->step = Step::Join;
    retries_.emplace(op->renewAt, op);
  } else {
    op->step = Step::Poll;
    retries_.emplace(std::min(op->renewAt, now + options_.pollSlice), op);
  }
  timerWake_.notify_one();
}

void AsyncAcquirer::grantHeard(const std::weak_ptr<Operation>& weak) noexcept {
  const OperationPtr op = weak.lock();
  if (op == nullptr) return;
  std::lock_guard<std::mutex> guard(mutex_);
  if (op->stage == Stage::Parked) {
    op->step = Step::Take;
    requeueLocked(op);
  } else if (op->stage == Stage::Running || op->stage == Stage::Queued) {
    op->grantHeard = true;  // a Join asks the server anyway; a Running one takes next
  }
}

void AsyncAcquirer::endLocked(const OperationPtr& op, std::exception_ptr error) {
  if (op->step == Step::Leave) return;  // ending already: its outcome stands
  if (!op->placed) {
    finishLocked(op, Lease(), std::move(error));
    return;
  }
  op->afterLeave = std::move(error);
  op->step = Step::Leave;
  requeueLocked(op);  // run by a worker even after close(): workers drain the queue before ending
}

void AsyncAcquirer::leavePlace(const OperationPtr& op) {
  queue_->leave(op->key, op->token, op->leaseTime);
  std::lock_guard<std::mutex> guard(mutex_);
  op->placed = false;
  finishLocked(op, Lease(), std::move(op->afterLeave));
}

void AsyncAcquirer::requeueLocked(const OperationPtr& op) {
  op->stage = Stage::Queued;
  runQueue_.push_back(op);
  workReady_.notify_one();
}

bool AsyncAcquirer::listeningOn(const std::string& key) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = keys_.find(key);
  return it != keys_.end() && it->second.listening;
}

bool AsyncAcquirer::ridesOutLocked(const OperationPtr& op, const std::exception_ptr& error) {
  if (op->deadline == Deadline::min()) return false;  // a single try reports it, as tryLock does
  try {
    std::rethrow_exception(error);
  } catch (const ConnectionError&) {
  } catch (...) {
    return false;
  }
  const auto now = Clock::now();
  if (!op->outage) {
    op->outage.emplace(milliseconds(10), milliseconds(500));
    op->outageEnds = op->deadline != Deadline::max() ? op->deadline : now + options_.outageTolerance;
  }
  op->outageError = error;
  if (now >= op->outageEnds) return false;  // the last try was at the budget's end
  retries_.emplace(std::min(now + op->outage->next(), op->outageEnds), op);
  timerWake_.notify_one();
  return true;
}

void AsyncAcquirer::ensureWatch(const std::string& key) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    KeyWaiters& waiters = keys_[key];
    if (waiters.watchMade) {  // made, or being made by a try that then tries again
      waiters.listening = true;
      return;
    }
    waiters.watchMade = true;
  }
  std::unique_ptr<IReleaseWatch> watch;
  std::shared_ptr<std::atomic<bool>> heard;
  try {
    watch = backend_->watch(key);  // nullptr: a backend without release messages (the backstop polls)
    if (watch != nullptr) heard = tellTimerOf(*watch);
  } catch (const std::exception& error) {
    logger()->debug("dlock: release watch of {} for an async acquire not made: {}", quoteKey(key), error.what());
  }
  std::unique_lock<std::mutex> guard(mutex_);
  const auto it = keys_.find(key);
  // Listening from now on even without a watch (a backend without release messages, or one that
  // failed: the backstop retries, and the next try makes it again).
  if (it != keys_.end()) it->second.listening = true;
  // Installed only where none is (the timer may be polling one, unlocked); else `watch` goes
  // unused, destroyed below, unlocked.
  if (it == keys_.end() || it->second.watch != nullptr) {
    guard.unlock();
    return;
  }
  it->second.watch = std::move(watch);
  it->second.heard = std::move(heard);
  it->second.pollAt = Clock::now() + options_.backstop;
  it->second.watchMade = it->second.watch != nullptr;  // a failed one is made again by the next try
  if (it->second.watch != nullptr) timerWake_.notify_one();  // a release heard meanwhile is polled now
}

std::shared_ptr<std::atomic<bool>> AsyncAcquirer::tellTimerOf(IReleaseWatch& watch) {
  auto heard = std::make_shared<std::atomic<bool>>(false);
  // On the backend's thread, its locks held: the lock order is the backend's, then mutex_ (this
  // object never calls a watch or the backend with mutex_ held).
  const bool tells = watch.notifyOnRelease([this, heard] {
    heard->store(true, std::memory_order_relaxed);
    std::lock_guard<std::mutex> guard(mutex_);
    anyHeard_ = true;
    timerWake_.notify_one();
  });
  return tells ? heard : nullptr;
}

void AsyncAcquirer::parkLocked(const OperationPtr& op) {
  KeyWaiters& waiters = keys_[op->key];
  if (waiters.releaseHeard) {  // released since the watch was made or last polled: try again now
    waiters.releaseHeard = false;
    op->stage = Stage::Queued;
    runQueue_.push_back(op);
    workReady_.notify_one();
    return;
  }
  op->stage = Stage::Parked;
  if (waiters.parked.empty()) waiters.backstopAt = Clock::now() + options_.backstop;
  if (op->woken) {
    waiters.parked.push_front(op);
  } else {
    waiters.parked.push_back(op);
  }
  op->woken = false;
  timerWake_.notify_one();
}

void AsyncAcquirer::wakeHeadLocked(KeyWaiters& waiters) {
  if (waiters.parked.empty()) {
    waiters.releaseHeard = true;
    return;
  }
  OperationPtr op = std::move(waiters.parked.front());
  waiters.parked.pop_front();
  op->stage = Stage::Queued;
  op->woken = true;
  runQueue_.push_back(std::move(op));
  workReady_.notify_one();
}

void AsyncAcquirer::wakeNextLocked(const std::string& key) {
  const auto it = keys_.find(key);
  if (it != keys_.end() && !it->second.parked.empty()) wakeHeadLocked(it->second);
}

void AsyncAcquirer::unparkLocked(const OperationPtr& op) {
  const auto it = keys_.find(op->key);
  if (it == keys_.end()) return;
  auto& parked = it->second.parked;
  parked.erase(std::remove(parked.begin(), parked.end(), op), parked.end());
}

void AsyncAcquirer::cancelled(std::uint64_t id) noexcept {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = operations_.find(id);
  if (it == operations_.end()) return;
  const OperationPtr op = it->second;
  if (op->stage == Stage::Running) {
    op->interrupted = true;  // its worker finishes it once the try is back
    return;
  }
  if (op->stage == Stage::Parked) unparkLocked(op);
  endLocked(op, interruptedError(*op, false));
}

void AsyncAcquirer::finishLocked(const OperationPtr& op, Lease lease, std::exception_ptr error) {
  if (op->stage == Stage::Done) return;
  op->stage = Stage::Done;
  operations_.erase(op->id);
  if (const auto it = keys_.find(op->key); it != keys_.end() && it->second.users > 0) --it->second.users;
  completions_.push_back(Completion{op, std::move(lease), std::move(error), std::move(op->grants)});
  completionReady_.notify_one();
}

std::exception_ptr AsyncAcquirer::interruptedError(const Operation& op, bool closing) const {
  const std::string what = "dlock: acquireAsync " + quoteKey(op.key) + " on " + backend_->describe();
  return std::make_exception_ptr(InterruptedError(what + (closing ? ": the lock was closed" : ": cancelled")));
}

void AsyncAcquirer::runTimer() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (!stopping_) {
    fireDeadlinesLocked(Clock::now());
    pollWatches(guard);
    if (stopping_) return;
    const auto now = Clock::now();
    for (auto& [key, waiters] : keys_) {
      if (!waiters.parked.empty() && now >= waiters.backstopAt) {
        waiters.backstopAt = now + options_.backstop;
        wakeHeadLocked(waiters);
      }
    }
    if (anyHeard_) continue;  // told while polling: poll again before sleeping
    const auto next = nextWakeLocked(now);
    if (next == Clock::time_point::max()) {
      timerWake_.wait(guard);
    } else {
      timerWake_.wait_until(guard, next);
    }
  }
}

void AsyncAcquirer::fireDeadlinesLocked(Clock::time_point now) {
  while (!retries_.empty() && retries_.begin()->first <= now) {
    const OperationPtr op = retries_.begin()->second.lock();
    retries_.erase(retries_.begin());
    if (op == nullptr || op->stage != Stage::Parked) continue;  // tried meanwhile (a release)
    unparkLocked(op);
    op->stage = Stage::Queued;
    runQueue_.push_back(op);
    workReady_.notify_one();
  }
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    const OperationPtr op = deadlines_.begin()->second.lock();
    deadlines_.erase(deadlines_.begin());
    // Parked only: a queued or running one finishes its try first, then sees its deadline passed.
    if (op == nullptr || op->stage != Stage::Parked) continue;
    unparkLocked(op);
    endLocked(op, op->outageError);  // an empty Lease, or the outage that lasted
  }
}

void AsyncAcquirer::pollWatches(std::unique_lock<std::mutex>& guard) {
  std::vector<std::pair<std::string, IReleaseWatch*>> polled;
  std::vector<std::unique_ptr<IReleaseWatch>> dropped;
  anyHeard_ = false;
  const auto now = Clock::now();
  for (auto it = keys_.begin(); it != keys_.end();) {
    KeyWaiters& waiters = it->second;
    if (waiters.users == 0) {  // only here are watches destroyed, so `polled` stays valid unlocked
      dropped.push_back(std::move(waiters.watch));
      it = keys_.erase(it);
      continue;
    }
    // A watch that tells is polled when told, and at the backstop's pace: a move of its key to
    // another node that no message shows is found then (the watch follows it when polled).
    const bool due = waiters.heard == nullptr || waiters.heard->exchange(false, std::memory_order_relaxed) ||
                     now >= waiters.pollAt;
    if (waiters.watch != nullptr && due) {
      if (waiters.heard != nullptr) waiters.pollAt = now + options_.backstop;
      polled.emplace_back(it->first, waiters.watch.get());
    }
    ++it;
  }
  if (polled.empty() && dropped.empty()) return;
  guard.unlock();
  dropped.clear();
  std::vector<std::string> released;
  for (const auto& [key, watch] : polled) {
    bool heard = true;  // a watch that failed: a try finds out more
    try {
      heard = watch->waitForRelease(milliseconds(0));
    } catch (const std::exception& error) {
      logger()->debug("dlock: release watch of {} failed: {}", quoteKey(key), error.what());
    }
    if (heard) released.push_back(key);
  }
  guard.lock();
  for (const std::string& key : released) {
    if (const auto it = keys_.find(key); it != keys_.end()) wakeHeadLocked(it->second);
  }
}

AsyncAcquirer::Clock::time_point AsyncAcquirer::nextWakeLocked(Clock::time_point now) const {
  auto next = deadlines_.empty() ? Clock::time_point::max() : deadlines_.begin()->first;
  if (!retries_.empty()) next = std::min(next, retries_.begin()->first);
  for (const auto& [key, waiters] : keys_) {
    if (waiters.users == 0 || (waiters.watch != nullptr && waiters.heard == nullptr)) {
      next = std::min(next, now + options_.pollSlice);
    }
    if (waiters.watch != nullptr && waiters.heard != nullptr) next = std::min(next, waiters.pollAt);
    if (!waiters.parked.empty()) next = std::min(next, waiters.backstopAt);
  }
  return next;
}

void AsyncAcquirer::runCompletions() {
  std::unique_lock<std::mutex> guard(mutex_);
  while (true) {
    completionReady_.wait(guard, [this] { return completionsEnd_ || !completions_.empty(); });
    if (completions_.empty()) return;
    Completion completion = std::move(completions_.front());
    completions_.pop_front();
    guard.unlock();
    try {
      completion.op->done(std::move(completion.lease), std::move(completion.error));
    } catch (const std::exception& error) {
      logger()->warn("dlock: an acquireAsync callback of {} threw: {}", quoteKey(completion.op->key), error.what());
    } catch (...) {
      logger()->warn("dlock: an acquireAsync callback of {} threw", quoteKey(completion.op->key));
    }
    completion.op->onCancel.reset();  // unlocked: a cancel running it waits for the mutex
    completion = Completion{};
    guard.lock();
  }
}

std::size_t AsyncAcquirer::pending() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return operations_.size();
}

void AsyncAcquirer::close() noexcept {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (closed_) return;
    closed_ = true;
    std::vector<OperationPtr> open;
    open.reserve(operations_.size());
    for (const auto& entry : operations_) open.push_back(entry.second);
    for (const OperationPtr& op : open) {
      if (op->stage == Stage::Running) {
        op->interrupted = true;
        op->closing = true;
        continue;
      }
      if (op->stage == Stage::Parked) unparkLocked(op);
      endLocked(op, interruptedError(*op, true));  // a place is left by a worker before they end
    }
    stopping_ = true;
    workReady_.notify_all();
    timerWake_.notify_all();
  }
  joinThreads();
}

void AsyncAcquirer::joinThreads() noexcept {
  // A callback that closes the lock runs on the completion thread, which cannot join itself: it
  // ends after that callback, joined by the destructor.
  const auto self = std::this_thread::get_id();
  for (std::thread& worker : workers_) {
    if (worker.joinable() && worker.get_id() != self) worker.join();
  }
  if (timer_.joinable() && timer_.get_id() != self) timer_.join();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    completionsEnd_ = true;
    completionReady_.notify_all();
  }
  if (completer_.joinable() && completer_.get_id() != self) completer_.join();
}

}  // namespace dlock::detail
