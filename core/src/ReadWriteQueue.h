// SPDX-License-Identifier: Apache-2.0
// ReadWriteQueue.h — one side (read or write) of a backend's read-write lock seen as a fair queue:
// an IOperator and an IFairOperator over IReadWriteOperator for one mode. So the fair lock's
// attempt (FairAttempt.h, through a FairBackend) waits for a read or a write hold as it waits for
// a fair hand-off: a place renewed by tries, a grant on the process's channel, leave on timeout.
// lock() tries once; unlock() releases with hand-off; extend() renews this mode's hold only.
// Owner: the read-write lock's core. Thread safety: thread-safe (the backend is).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/IReadWriteOperator.h"

namespace dlock::detail {

class ReadWriteQueue final : public IOperator, public IFairOperator {
 public:
  // `rw` is `backend`'s; `backend` keeps it alive.
  ReadWriteQueue(std::shared_ptr<IOperator> backend, IReadWriteOperator& rw, ReadWriteMode mode)
      : backend_(std::move(backend)), rw_(rw), mode_(mode) {}

  [[nodiscard]] ReadWriteMode mode() const noexcept { return mode_; }

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    const FairAcquireResult fair = fairLock(key, token, ttl, std::chrono::milliseconds(0));
    AcquireResult result;
    result.acquired = fair.acquired;
    result.fencingToken = fair.fencingToken;
    result.validity = fair.validity;
    result.holderTtl = fair.holderTtl;
    return result;
  }
  ReleaseResult unlock(std::string_view key, std::string_view token) override { return fairUnlock(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return rw_.extendReadWrite(ReadWriteLease{key, token, mode_}, ttl);
  }
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override {
    std::vector<ReadWriteLease> holds;
    holds.reserve(leases.size());
    for (const LeaseRef& lease : leases) holds.push_back(ReadWriteLease{lease.key, lease.token, mode_});
    return rw_.extendReadWriteAll(holds, ttl);
  }
  [[nodiscard]] std::string describe() const override { return backend_->describe(); }

  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override {
    return mode_ == ReadWriteMode::Read ? rw_.acquireRead(key, token, ttl, waiterLease)
                                        : rw_.acquireWrite(key, token, ttl, waiterLease);
  }
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override {
    return mode_ == ReadWriteMode::Read ? rw_.releaseRead(key, token) : rw_.releaseWrite(key, token);
  }
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return rw_.leaveReadWriteQueue(key, token, mode_, ttl);
  }
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override {
    return rw_.watchReadWriteGrants(key, token);
  }

 private:
  const std::shared_ptr<IOperator> backend_;
  IReadWriteOperator& rw_;  // backend_'s
  const ReadWriteMode mode_;
};

}  // namespace dlock::detail
