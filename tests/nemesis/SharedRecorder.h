// SPDX-License-Identifier: Apache-2.0
// SharedRecorder.h — the read-write and semaphore workloads' backend as the core's ReadWriteLock
// and Semaphore see it: an IOperator, IReadWriteOperator and ISemaphoreOperator that forwards every
// call to the backend's operators (or a broken double over them: BrokenShared.h) and records what
// the shared checks (SharedChecks.h) need from the calls those classes made (History.h ops,
// message = the owner token):
//
//   lease    time = the send of an acquisition, downgrade, upgrade or renewal the backend
//            confirmed, value = its validity in ms (the whole ttl unless it said less)
//   attempt  time = the attempt's completion, value = "<outcome> <send-ns> <position> <mode>
//            <validity-ms>": `taken` (this attempt acquired, or found it ours already: validity
//            is what it reported, 0 for the whole lease), `queued` (at `position`), or `granted`
//            (a grant heard on the waiter's watch, confirmed by the claim's extend: send = the
//            extend's); none for the read a writer takes to downgrade (never queued)
//   leave-failed  a leave of the queue that could not be sent (its place, or what a lost reply
//            took, ends with its lease)
//
// The owner token of the last acquisition this thread saw confirmed for a key (lastOwner) names
// the workload's holds: the public classes keep their tokens to themselves.
// Owner: one client process. Thread safety: thread-safe, as the wrapped operators.
#pragma once

#include <dlock/IOperator.h>
#include <dlock/IReadWriteOperator.h>
#include <dlock/ISemaphoreOperator.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "History.h"

namespace dlock::nemesis {

class SharedRecorder final : public IOperator, public IReadWriteOperator, public ISemaphoreOperator {
 public:
  using Sink = std::function<void(Op)>;

  // `backend`: the client's connection; `readWrite`, `semaphores`: its operators, or broken doubles.
  SharedRecorder(std::shared_ptr<IOperator> backend, std::shared_ptr<IReadWriteOperator> readWrite,
                 std::shared_ptr<ISemaphoreOperator> semaphores, Sink sink);

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return backend_->lock(key, token, ttl);
  }
  ReleaseResult unlock(std::string_view key, std::string_view token) override { return backend_->unlock(key, token); }
  ReleaseResult cancel(std::string_view key, std::string_view token) override { return backend_->cancel(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return backend_->extend(key, token, ttl);
  }
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override {
    return backend_->extendAll(leases, ttl);
  }
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override { return backend_->watch(key); }
  [[nodiscard]] std::string describe() const override { return backend_->describe(); }
  [[nodiscard]] std::string readWriteUnsupported() const override;
  [[nodiscard]] std::string semaphoreUnsupported() const override;

  // The owner token of this thread's last confirmed acquisition of `key` ("" if none).
  [[nodiscard]] static std::string lastOwner(const std::string& key);

 private:
  using Id = std::pair<std::string, std::string>;  // (key, token)

  FairAcquireResult doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                              std::chrono::milliseconds ttl, std::chrono::milliseconds waiterLease) override;
  ReleaseResult doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) override;
  bool doDowngrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) override;
  FairAcquireResult doTryUpgrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) override;
  bool doExtend(const ReadWriteLease& lease, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> doExtendAll(const std::vector<ReadWriteLease>& leases, std::chrono::milliseconds ttl) override;
  bool doLeave(std::string_view name, std::string_view token, ReadWriteMode mode, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> doWatch(std::string_view name, std::string_view token) override;
  ReadWriteInfo doInspect(std::string_view name) override;

  SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                          std::uint32_t capacity, std::chrono::milliseconds lease,
                                          std::chrono::milliseconds waiterLease) override;
  ReleaseResult doReleasePermits(std::string_view name, std::string_view token) override;
  bool doExtendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) override;
  std::vector<ExtendResult> doExtendPermitsAll(const std::vector<LeaseRef>& leases,
                                               std::chrono::milliseconds lease) override;
  bool doLeavePermitQueue(std::string_view name, std::string_view token) override;
  std::unique_ptr<IGrantWatch> doWatchPermitGrants(std::string_view name, std::string_view token) override;
  std::uint32_t doResizeSemaphore(std::string_view name, std::uint32_t capacity) override;
  SemaphoreInfo doInspectSemaphore(std::string_view name) override;

  IReadWriteOperator& readWrite() const;
  ISemaphoreOperator& semaphores() const;
  // One attempt's records: its lease when acquired, and the attempt itself.
  void attempted(std::string_view key, std::string_view token, const char* mode, std::int64_t sentNs, bool acquired,
                 std::uint32_t position, std::chrono::milliseconds validity, std::chrono::milliseconds ttl);
  // A renewal, downgrade or claim confirmed at `sentNs`: its lease, and `granted` when it confirmed a heard grant.
  void confirmed(std::string_view key, std::string_view token, const char* mode, std::int64_t sentNs,
                 std::chrono::milliseconds validity, bool claim);
  void heard(const std::string& key, const std::string& token);
  // Whether `id` holds the write now (a read it takes is then a downgrade's first step).
  void wrote(const Id& id, bool holds);
  void record(const char* op, std::string_view key, std::string_view token, std::string value, std::int64_t timeNs) const;

  std::shared_ptr<IOperator> backend_;
  std::shared_ptr<IReadWriteOperator> readWrite_;
  std::shared_ptr<ISemaphoreOperator> semaphores_;
  Sink sink_;
  std::mutex mutex_;
  std::map<Id, bool> claims_;  // guarded by mutex_: grants heard, not yet confirmed
  std::set<Id> writers_;       // guarded by mutex_: tokens holding a write
};

}  // namespace dlock::nemesis
