// SPDX-License-Identifier: Apache-2.0
// Fixtures.h — building blocks of the unit suite: a lock over a MemoryOperator on a clock the
// test controls, an operator to bend, and an event to force an interleaving of threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

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
