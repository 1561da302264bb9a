// SPDX-License-Identifier: Apache-2.0
// Wakeup.h — the wake-up of the wait this thread is in, so that a cancel or close() ends every
// pause of that wait within a millisecond, however deep in a backend the pause sleeps (DESIGN.md,
// "One wait loop"). The one place a pause learns of a cancel: the wait loop installs it, the
// pauses (an IWait's sleep, a release or grant watch, the process queue, an outage's back-off)
// sleep through it.
//
//   Wakeup wakeup; Wakeup::Scope scope(wakeup);    pauses on this thread end once wakeup.wake()
//   Wakeup::waitFor(cv, guard, timeout, pred)      cv.wait_for that also ends on the wake; pred()'s last
//   Wakeup::sleepUntil(t) / sleepFor(d)            a sleep that ends on the wake
//   Wakeup::sleepUntilSteady(t)                    a real-time sleep that ends on the wake
//   Wakeup::woken()                                the current scope was woken
//   Wakeup::inScope()                              this thread is in a scope (a socket wait
//                                                  then polls in slices: Socket.cpp)
//
// A Wakeup made with a clock (a lock's VirtualClock) runs its scope's waits on that clock: their
// timeouts and deadlines are on it, and they sleep through Clock::waitUntil, so advancing the
// clock ends them; its destructor tells the clock that the thread's wait is over (forgetWaiter).
// Without one (the steady clock) they are the plain waits, at no extra cost.
// Outside any scope these are the plain waits. The state is one trivially constructed
// thread_local pointer (as CallBudget's): no guard a forked child could find held.
// Owner: one wait (the scope's thread); wake() from any thread. Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dlock/Clock.h"

namespace dlock::detail {

class Wakeup {
 public:
  using Clock = std::chrono::steady_clock;

  class Scope {
   public:
    explicit Scope(Wakeup& wakeup) noexcept : previous_(slot()) { slot() = &wakeup; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { slot() = previous_; }

   private:
    Wakeup* const previous_;
  };

  // `clock`: the clock the scope's waits run on; nullptr for the steady clock.
  explicit Wakeup(::dlock::Clock* clock = nullptr) noexcept : clock_(clock) {}
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;
  ~Wakeup() {
    if (clock_ == nullptr) return;
    try {
      clock_->forgetWaiter();
    } catch (...) {  // a mutex that failed: the clock waits its bounded while for this thread
    }
  }

  // Ends the scope's pause in progress and every later one. From any thread; never waits for
  // the sleeper to run, so one thread wakes many at once (close()).
  void wake() noexcept {
    Listener listener;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      woken_.store(true, std::memory_order_seq_cst);
      own_.notify_all();
      if (listening_.cv == nullptr) return;
      listener = listening_;
      notifying_ = true;  // pins the listener: it stays listening until this notify is done
    }
    {
      // Under the listener's mutex, outside ours (it takes ours while holding its own): it is
      // then either before its check of woken_ or blocked, so the notify cannot fall between.
      std::lock_guard<std::mutex> guard(*listener.mutex);
      listener.cv->notify_all();
    }
    std::lock_guard<std::mutex> guard(mutex_);
    notifying_ = false;
    own_.notify_all();
  }
  [[nodiscard]] bool wokenHere() const noexcept { return woken_.load(std::memory_order_seq_cst); }

  // This thread is in a scope: its waits end on a wake.
  [[nodiscard]] static bool inScope() noexcept { return slot() != nullptr; }

  [[nodiscard]] static bool woken() noexcept {
    const Wakeup* current = slot();
    return current != nullptr && current->wokenHere();
  }

  // cv.wait_for(guard, timeout, pred), ended early by the current scope's wake; returns pred().
  template <class Predicate>
  static bool waitFor(std::condition_variable& cv, std::unique_lock<std::mutex>& guard,
                      std::chrono::milliseconds timeout, Predicate pred) {
    return waitUntil(cv, guard, deadlineAfter(timeout), pred);
  }
  // `deadline` is on the scope's clock (the steady clock's without one).
  template <class Predicate>
  static bool waitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& guard, Clock::time_point deadline,
                        Predicate pred) {
    Wakeup* current = slot();
    if (current == nullptr) return waitPlain(cv, guard, deadline, pred);
    // pred() once per check, as std's (a backend's may take what it found: a grant).
    bool met = false;
    current->listen(cv, guard);
    const auto done = [&] {
      met = pred();
      return met || current->wokenHere();
    };
    if (current->clock_ == nullptr) {
      waitPlain(cv, guard, deadline, done);
    } else {
      waitOnClock(*current->clock_, cv, guard, deadline, done);
    }
    current->stopListening(guard);
    return met;
  }

  // Sleeps until `deadline` (on the scope's clock) or the current scope's wake; false when woken.
  static bool sleepUntil(Clock::time_point deadline) {
    Wakeup* current = slot();
    if (current == nullptr || current->clock_ == nullptr) return sleepUntilSteady(deadline);
    std::unique_lock<std::mutex> guard(current->mutex_);
    return !waitOnClock(*current->clock_, current->own_, guard, deadline, [current] { return current->wokenHere(); });
  }
  static bool sleepFor(Clock::duration duration) { return sleepUntil(nowOnScopeClock() + duration); }
  // As sleepUntil, on the steady clock whatever the scope's clock: a pause that waits for the
  // world (a message's way to another process), not for the wait's time.
  static bool sleepUntilSteady(Clock::time_point deadline) {
    Wakeup* current = slot();
    if (current == nullptr) {
      std::this_thread::sleep_until(deadline);
      return true;
    }
    std::unique_lock<std::mutex> guard(current->mutex_);
    return !current->own_.wait_until(guard, deadline, [current] { return current->wokenHere(); });
  }

 private:
  static Clock::time_point nowOnScopeClock() {
    const Wakeup* current = slot();
    return current == nullptr || current->clock_ == nullptr ? Clock::now() : current->clock_->now();
  }
  static Clock::time_point deadlineAfter(std::chrono::milliseconds timeout) {
    const auto now = nowOnScopeClock();
    return timeout >= std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - now)
               ? Clock::time_point::max()
               : now + timeout;
  }
  // cv.wait_until(guard, deadline, pred) with the time and the sleep of `clock`.
  template <class Predicate>
  static bool waitOnClock(::dlock::Clock& clock, std::condition_variable& cv, std::unique_lock<std::mutex>& guard,
                          Clock::time_point deadline, Predicate pred) {
    while (!pred()) {
      if (clock.now() >= deadline) return pred();
      clock.waitUntil(guard, cv, deadline);
    }
    return true;
  }
  template <class Predicate>
  static bool waitPlain(std::condition_variable& cv, std::unique_lock<std::mutex>& guard, Clock::time_point deadline,
                        Predicate pred) {
    if (deadline == Clock::time_point::max()) {
      cv.wait(guard, pred);
      return true;
    }
    return cv.wait_until(guard, deadline, pred);
  }
  struct Listener {
    std::condition_variable* cv = nullptr;
    std::mutex* mutex = nullptr;
  };

  void listen(std::condition_variable& cv, std::unique_lock<std::mutex>& held) noexcept {
    std::lock_guard<std::mutex> guard(mutex_);
    listening_ = Listener{&cv, held.mutex()};
  }
  // With `held` locked, as a wait returns. A wake about to notify needs the listener's mutex:
  // give it up until that is done (only ever after a wake: the wait is ending anyway).
  void stopListening(std::unique_lock<std::mutex>& held) {
    std::unique_lock<std::mutex> guard(mutex_);
    if (notifying_) {
      held.unlock();
      own_.wait(guard, [this] { return !notifying_; });
      listening_ = Listener{};
      guard.unlock();
      held.lock();
      return;
    }
    listening_ = Listener{};
  }
  static Wakeup*& slot() noexcept {
    static thread_local Wakeup* current = nullptr;
    return current;
  }

  ::dlock::Clock* const clock_;   // the scope's waits' clock; nullptr: the steady clock
  std::atomic<bool> woken_{false};
  std::mutex mutex_;              // taken under a listener's mutex, never the other way round
  std::condition_variable own_;   // sleepUntil's, and stopListening's wait for a notify to end
  Listener listening_;            // guarded by mutex_; a backend's condition, while waited on
  bool notifying_ = false;        // guarded by mutex_; a wake is notifying listening_
};

}  // namespace dlock::detail
