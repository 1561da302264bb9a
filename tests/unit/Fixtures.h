// SPDX-License-Identifier: Apache-2.0
// Fixtures.h — building blocks of the unit suite: a lock over a MemoryOperator on a clock the
// test controls, an operator to bend, and an event to force an interleaving of threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "dlock/core/LockBuilder.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

namespace dlock::test {

using namespace std::chrono_literals;

// An IOperator passing every call to a MemoryOperator; tests override the calls they bend.
class ForwardingOperator : public IOperator, public IFenceRaiser, public ILeaseInspector {
 public:
  explicit ForwardingOperator(std::shared_ptr<MemoryOperator> inner) : inner_(std::move(inner)) {}
  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->lock(key, token, ttl);
  }
  ReleaseResult unlock(std::string_view key, std::string_view token) override { return inner_->unlock(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->extend(key, token, ttl);
  }
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override {
    return inner_->extendAll(leases, ttl);
  }
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override {
    return inner_->raiseFence(key, atLeast);
  }
  LeaseInfo inspect(std::string_view key) override { return inner_->inspect(key); }
  [[nodiscard]] std::string describe() const override { return "forwarding://"; }

 protected:
  std::shared_ptr<MemoryOperator> inner_;
};

// A one-shot signal between threads. wait() gives up after `budget` of real time, so a test whose
// interleaving went wrong fails instead of hanging.
class Event {
 public:
  // Notifies under the mutex: a waiter that then destroys the event cannot do so while the
  // notification is still on its way (the setter may be a thread that outlives the test's scope).
  void set() {
    std::lock_guard<std::mutex> guard(mutex_);
    set_ = true;
    changed_.notify_all();
  }
  // True once set; false when `budget` passed first.
  [[nodiscard]] bool wait(std::chrono::milliseconds budget = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> guard(mutex_);
    return changed_.wait_for(guard, budget, [this] { return set_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool set_ = false;  // guarded by mutex_
};

// Runs `body` (timed waits on `clock`, and what they decide) on its own thread, moving `clock` on
// by `step` each time `sleepers` threads (the body's, and any watchdog's) sleep on it, until the
// body returns: a wait on the virtual clock runs its course in no real time. Rethrows what the body
// threw. A body still running after 10 s of real time gets whole hours of virtual time until it
// ends (its timed waits run out), then std::runtime_error.
template <class Body>
void onVirtualTime(VirtualClock& clock, Body body, std::chrono::milliseconds step, std::size_t sleepers = 1) {
  std::atomic<bool> done{false};
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
    done = true;
  });
  const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool stalled = false;
  while (!done) {
    stalled = stalled || std::chrono::steady_clock::now() > giveUp;
    // The real-time budget only rechecks `done`: the event waited for is the body asleep.
    const bool asleep = clock.awaitSleepers(sleepers, std::chrono::milliseconds(10));
    if (done) break;
    if (stalled) {
      clock.advance(std::chrono::hours(1));
    } else if (asleep) {
      clock.advance(step);
    }
  }
  worker.join();
  if (error) std::rethrow_exception(error);
  if (stalled) throw std::runtime_error("the body did not end on the virtual clock within 10 s of real time");
}

struct VirtualFixture {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  std::shared_ptr<MemoryOperator> backend = std::make_shared<MemoryOperator>(clock);

  // A lock with a fixed lease (no watchdog).
  std::shared_ptr<ILock> leased(std::chrono::milliseconds lease) const {
    return LockBuilder().backend(backend).clock(clock).leaseTime(lease).build();
  }
  // A lock kept alive by the watchdog.
  std::shared_ptr<ILock> watched(std::chrono::milliseconds lease) const {
    return LockBuilder().backend(backend).clock(clock).watchdogLease(lease).build();
  }
};

}  // namespace dlock::test
