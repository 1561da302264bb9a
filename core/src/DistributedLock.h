// SPDX-License-Identifier: Apache-2.0
// DistributedLock.h — the ILock over any IOperator, made by LockBuilder. Thread holds live in
// RequestIdHolder (and in the core's kept holds, for close()); the algorithm lives in LockCore,
// shared with the Lease handles. Destroying it closes it (ILock::close).
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <memory>

#include "LockCore.h"
#include "async/AsyncAcquirer.h"
#include "dlock/detail/Fork.h"
#include "dlock/ILock.h"

namespace dlock::detail {

class DistributedLock final : public ILock {
 public:
  explicit DistributedLock(std::shared_ptr<LockCore> core);
  ~DistributedLock() override { doClose(); }

 private:
  bool doAcquire(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                 const CancelToken& cancel) override;
  void doUnlock(std::string_view key) override;
  bool doUnlockQuietly(std::string_view key) noexcept override;
  [[nodiscard]] bool doIsHeld(std::string_view key) const override;
  [[nodiscard]] unsigned doHoldCount(std::string_view key) const override;
  [[nodiscard]] std::uint64_t doFencingToken(std::string_view key) const override;
  Lease doAcquireLease(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                       const CancelToken& cancel) override;
  void doExtend(std::string_view key, std::chrono::milliseconds ttl) override;
  [[nodiscard]] std::chrono::milliseconds doRemainingLease(std::string_view key) const override;
  void doClose() noexcept override {
    async_->close();  // first: its tries in flight use the core
    core_->close();
  }
  AsyncAcquisition& doAsyncAcquisition() override { return *async_; }
  void doOnLockLost(LostHandler handler) override;
  [[nodiscard]] Condition doNewCondition(std::string_view key, std::string_view name) override;
  [[nodiscard]] LockStats doStats() const override;
  [[nodiscard]] const std::string& doDefaultKey() const noexcept override;

  [[noreturn]] void throwNotHeld(const char* operation, std::string_view key) const;
  // Forgets this thread's hold of `key` (RequestIdHolder and the core's kept holds).
  void erase(std::string_view key, const LeaseState& lease) noexcept;

  const std::shared_ptr<LockCore> core_;
  ForkLocal<AsyncAcquirer> async_;  // acquireAsync's; a forked child has none of its parent's
};

}  // namespace dlock::detail
