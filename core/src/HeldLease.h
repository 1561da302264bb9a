// SPDX-License-Identifier: Apache-2.0
// HeldLease.h — a Lease's link back to the lock core that granted it (Lease.h's LeaseControl),
// shared by the lock's Lease handles, the semaphore's PermitLease (HeldLease, over LockCore) and
// the read-write lock's Lease handles (CoreLease<ReadWriteCore>). `Core` has release,
// releaseQuietly, isValid, extend and remaining over a LeaseState.
// Owner: one Lease. Thread safety: as Lease (one thread at a time); the core is thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "LeaseState.h"
#include "LockCore.h"
#include "dlock/Lease.h"
#include "dlock/Validation.h"

namespace dlock::detail {

template <class Core>
class CoreLease final : public LeaseControl {
 public:
  CoreLease(std::shared_ptr<Core> core, std::shared_ptr<LeaseState> lease)
      : core_(std::move(core)), lease_(std::move(lease)) {}

  void release() override { core_->release(*lease_); }
  bool releaseQuietly() noexcept override { return core_->releaseQuietly(*lease_); }
  [[nodiscard]] bool isHeld() const override { return !lease_->finished() && core_->isValid(*lease_); }
  [[nodiscard]] const std::string& key() const noexcept override { return lease_->key; }
  [[nodiscard]] const std::string& token() const noexcept override { return lease_->token; }
  [[nodiscard]] std::uint64_t fencingToken() const noexcept override { return lease_->fencingToken; }
  [[nodiscard]] std::chrono::steady_clock::time_point validUntil() const override { return lease_->deadline(); }
  void extend(std::chrono::milliseconds ttl) override {
    detail::checkLeaseTime(ttl, "the lease time", "extend");
    core_->extend(*lease_, ttl);
  }
  [[nodiscard]] std::chrono::milliseconds remainingLease() const override { return core_->remaining(*lease_); }

 private:
  const std::shared_ptr<Core> core_;
  const std::shared_ptr<LeaseState> lease_;
};

using HeldLease = CoreLease<LockCore>;

}  // namespace dlock::detail
