// SPDX-License-Identifier: Apache-2.0
#include "DistributedSemaphore.h"

#include <utility>

#include "HeldLease.h"
#include "PermitAttempt.h"
#include "dlock/core/WaitStrategies.h"

namespace dlock::detail {

using std::chrono::milliseconds;

namespace {

LockCapabilities capabilitiesOf(std::shared_ptr<IRenewalBatch> renewals) {
  LockCapabilities capabilities;
  capabilities.renewalBatch = std::move(renewals);
  return capabilities;
}

}  // namespace

DistributedSemaphore::DistributedSemaphore(std::string name, std::shared_ptr<PermitBackend> permits,
                                           std::shared_ptr<Clock> clock, const LockOptions& options,
                                           std::shared_ptr<IRenewalBatch> renewals,
                                           std::shared_ptr<WatchdogHost> watchdogs)
    : name_(std::move(name)),
      permits_(std::move(permits)),
      clock_(std::move(clock)),
      waiterLease_(options.waiterLease),
      // The core's IWait is never used: PermitAttempt waits on its grant watch.
      core_(std::make_shared<LockCore>(permits_, capabilitiesOf(std::move(renewals)), std::make_shared<FixedIntervalWait>(),
                                       clock_, options, std::move(watchdogs))) {}

PermitLease DistributedSemaphore::doAcquire(std::uint32_t permits, Deadline deadline,
                                            std::optional<milliseconds> leaseTime, const CancelToken& cancel) {
  std::shared_ptr<LeaseState> lease = core_->acquireBy(
      name_, deadline, leaseTime, LeaseKind::Permits, cancel, [&](const AttemptTools& tools, const WaitPolicy& policy) {
        return std::make_unique<PermitAttempt>(tools, *permits_, permits, policy.once() ? milliseconds(0) : waiterLease_);
      }, permits);
  if (!lease) return PermitLease();
  return PermitLease(Lease(std::make_unique<HeldLease>(core_, std::move(lease))), permits);
}

std::uint32_t DistributedSemaphore::doResize(std::uint32_t capacity) {
  const std::uint32_t admitted = permits_->semaphores().resizeSemaphore(name_, capacity);
  permits_->setCapacity(capacity);
  return admitted;
}

SemaphoreInfo DistributedSemaphore::doInspect() { return permits_->semaphores().inspectSemaphore(name_); }

LockStats DistributedSemaphore::doStats() const {
  LockStats stats = core_->stats();
  stats.name = name_;
  stats.kind = StatsKind::Semaphore;
  const LockCounters& counters = core_->counters();
  stats.permitsInUse = counters.heldAt(static_cast<std::size_t>(LeaseKind::Permits), clock_->now());
  stats.waiting = LockCounters::gauge(counters.waiting[static_cast<std::size_t>(LeaseKind::Permits)]);
  stats.capacity = permits_->capacity();
  return stats;
}

}  // namespace dlock::detail
