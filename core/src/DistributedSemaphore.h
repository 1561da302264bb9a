// SPDX-License-Identifier: Apache-2.0
// DistributedSemaphore.h — the Semaphore over any ISemaphoreOperator, made by SemaphoreBuilder:
// a LockCore over the semaphore's PermitBackend (releases, their evidence, the watchdog, lost
// handlers, as for locks), acquiring through PermitAttempt on the one wait loop.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <memory>
#include <string>

#include "LockCore.h"
#include "PermitBackend.h"
#include "dlock/Clock.h"
#include "dlock/core/Semaphore.h"

namespace dlock::detail {

class DistributedSemaphore final : public Semaphore {
 public:
  // `renewals`: the backend's, for a shared watchdog (`watchdogs`; null: the semaphore's own).
  DistributedSemaphore(std::string name, std::shared_ptr<PermitBackend> permits, std::shared_ptr<Clock> clock,
                       const LockOptions& options, std::shared_ptr<IRenewalBatch> renewals = nullptr,
                       std::shared_ptr<WatchdogHost> watchdogs = nullptr);
  ~DistributedSemaphore() override { core_->close(); }

 private:
  PermitLease doAcquire(std::uint32_t permits, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                        const CancelToken& cancel) override;
  void doClose() noexcept override { core_->close(); }
  std::uint32_t doResize(std::uint32_t capacity) override;
  SemaphoreInfo doInspect() override;
  [[nodiscard]] std::uint32_t doCapacity() const noexcept override { return permits_->capacity(); }
  [[nodiscard]] const std::string& doName() const noexcept override { return name_; }
  void doOnPermitsLost(LostHandler handler) override { core_->setLostHandler(std::move(handler)); }
  [[nodiscard]] LockStats doStats() const override;

  const std::string name_;
  const std::shared_ptr<PermitBackend> permits_;
  const std::shared_ptr<Clock> clock_;
  const std::chrono::milliseconds waiterLease_;
  const std::shared_ptr<LockCore> core_;
};

}  // namespace dlock::detail
