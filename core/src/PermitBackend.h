// SPDX-License-Identifier: Apache-2.0
// PermitBackend.h — the permits of one semaphore as the lock core sees a backend: an IOperator
// over ISemaphoreOperator (as FairBackend is over a fair queue), so LockCore's release, its
// evidence rules and LockLostError, the watchdog and the Lease handles serve permits unchanged.
// The key is the semaphore's name: unlock() releases a token's permits (admitting the head
// waiters that fit, in the backend's same step), extend() renews them, extendAll() renews a batch
// in one extendPermitsAll. lock() takes one permit, once; the semaphore acquires through
// PermitAttempt instead, with its count. The capacity lives here: the one the semaphore was built
// with, or its last resize.
// Owner: one semaphore's LockCore (shared with its watchdog). Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/IOperator.h"
#include "dlock/ISemaphoreOperator.h"

namespace dlock::detail {

class PermitBackend final : public IOperator {
 public:
  // `semaphores` is `backend`'s own interface (kept alive by `backend`).
  PermitBackend(std::shared_ptr<IOperator> backend, ISemaphoreOperator& semaphores, std::uint32_t capacity)
      : backend_(std::move(backend)), semaphores_(semaphores), capacity_(capacity) {}

  [[nodiscard]] ISemaphoreOperator& semaphores() const noexcept { return semaphores_; }
  [[nodiscard]] std::uint32_t capacity() const noexcept { return capacity_.load(std::memory_order_acquire); }
  void setCapacity(std::uint32_t capacity) noexcept { capacity_.store(capacity, std::memory_order_release); }

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    const SemaphoreAcquireResult taken =
        semaphores_.acquirePermits(key, token, 1, capacity(), ttl, std::chrono::milliseconds(0));
    AcquireResult result;
    result.acquired = taken.acquired;
    result.fencingToken = taken.fencingToken;
    result.validity = taken.validity;
    result.holderTtl = taken.nextExpiry;
    return result;
  }

  ReleaseResult unlock(std::string_view key, std::string_view token) override {
    ReleaseResult result = semaphores_.releasePermits(key, token);
    result.notified = 0;  // the permits went to waiters in the release itself: nothing to hold back from
    return result;
  }

  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return semaphores_.extendPermits(key, token, ttl);
  }

  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override {
    return semaphores_.extendPermitsAll(leases, ttl);
  }

  [[nodiscard]] std::string describe() const override { return backend_->describe(); }

 private:
  const std::shared_ptr<IOperator> backend_;
  ISemaphoreOperator& semaphores_;  // backend_'s
  std::atomic<std::uint32_t> capacity_;
};

}  // namespace dlock::detail
