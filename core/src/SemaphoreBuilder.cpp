// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/SemaphoreBuilder.h"

#include <utility>

#include "DistributedSemaphore.h"
#include "PermitBackend.h"
#include "WatchdogHost.h"
#include "dlock/IRenewalBatch.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock {
namespace {

// The semaphore's face of `backend`, found here once: ConfigError, saying why, when it has none.
ISemaphoreOperator& semaphoresOf(const std::shared_ptr<IOperator>& backend) {
  auto* semaphores = dynamic_cast<ISemaphoreOperator*>(backend.get());
  if (semaphores == nullptr) {
    throw ConfigError("dlock: SemaphoreBuilder: a semaphore needs one count and one waiter queue per name on one "
                      "server; " + backend->describe() +
                      " has none (Redlock spreads a name over independent servers, whose counts and queues would "
                      "disagree, so a quorum could admit more holders than the capacity); use a single, Sentinel or "
                      "Cluster backend");
  }
  const std::string unsupported = semaphores->semaphoreUnsupported();
  if (!unsupported.empty()) throw ConfigError("dlock: SemaphoreBuilder: " + backend->describe() + ": " + unsupported);
  return *semaphores;
}

// The options' rules, each reported as a bad option (as LockBuilder's).
void checkOptions(const LockOptions& options) {
  if (options.outageTolerance.count() < 0) {
    throw ConfigError("dlock: SemaphoreBuilder: outageTolerance must not be negative");
  }
  try {
    if (options.leaseTime) detail::checkLeaseTime(*options.leaseTime, "leaseTime", "SemaphoreBuilder");
    detail::checkLeaseTime(options.watchdogLease, "watchdogLease", "SemaphoreBuilder");
    detail::checkLeaseTime(options.waiterLease, "waiterLease", "SemaphoreBuilder");
  } catch (const InvalidArgumentError& error) {
    throw ConfigError(error.what());
  }
  if (options.watchdogLease < std::chrono::milliseconds(3) || options.waiterLease < std::chrono::milliseconds(3)) {
    throw ConfigError("dlock: SemaphoreBuilder: watchdogLease and waiterLease must be at least 3 ms");
  }
}

}  // namespace

SemaphoreBuilder& SemaphoreBuilder::backend(std::shared_ptr<IOperator> backend) {
  backend_ = std::move(backend);
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::name(std::string name) {
  name_ = std::move(name);
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::permits(std::uint32_t capacity) {
  capacity_ = capacity;
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::leaseTime(std::chrono::milliseconds lease) {
  options_.leaseTime = lease;
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::watchdogLease(std::chrono::milliseconds lease) {
  options_.watchdogLease = lease;
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::waiterLease(std::chrono::milliseconds lease) {
  options_.waiterLease = lease;
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::outageTolerance(std::chrono::milliseconds tolerance) {
  options_.outageTolerance = tolerance;
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::clock(std::shared_ptr<Clock> clock) {
  clock_ = std::move(clock);
  return *this;
}

SemaphoreBuilder& SemaphoreBuilder::watchdog(SharedWatchdog watchdog) {
  watchdog_ = watchdog.host();
  return *this;
}

std::shared_ptr<Semaphore> SemaphoreBuilder::build() const {
  if (!backend_) throw ConfigError("dlock: SemaphoreBuilder: no backend; call backend(...) with an IOperator");
  detail::checkKey(name_, "SemaphoreBuilder name");
  Semaphore::checkCapacity(capacity_, "SemaphoreBuilder permits");
  checkOptions(options_);
  ISemaphoreOperator& semaphores = semaphoresOf(backend_);
  LockOptions options = options_;
  options.name = name_;
  options.defaultKey = name_;
  auto permits = std::make_shared<detail::PermitBackend>(backend_, semaphores, capacity_);
  auto clock = clock_ ? clock_ : SteadyClock::instance();
  std::shared_ptr<IRenewalBatch> renewals;
  if (auto* batch = dynamic_cast<IRenewalBatch*>(backend_.get())) renewals = std::shared_ptr<IRenewalBatch>(backend_, batch);
  auto watchdogs = detail::sharedOn(watchdog_, clock);
  return std::make_shared<detail::DistributedSemaphore>(name_, std::move(permits), std::move(clock), options,
                                                        std::move(renewals), std::move(watchdogs));
}

}  // namespace dlock
