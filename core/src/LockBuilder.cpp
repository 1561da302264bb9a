// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/LockBuilder.h"

#include <utility>

#include "DistributedLock.h"
#include "LockCapabilities.h"
#include "LockCore.h"
#include "ReadWriteCore.h"
#include "dlock/IConditionOperator.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/WaitStrategies.h"

namespace dlock {
namespace {

// The conditions newCondition uses; a backend without them is refused there, not here.
void chooseCondition(const std::shared_ptr<IOperator>& backend, const LockOptions& options,
                     detail::LockCapabilities& capabilities) {
  capabilities.conditionLock = options.fair ? ConditionLock::Fair : ConditionLock::Exclusive;
  auto* condition = dynamic_cast<IConditionOperator*>(backend.get());
  if (condition == nullptr) {
    capabilities.conditionUnsupported = backend->describe() +
                                        " keeps no conditions (Redlock spreads a key over independent servers, whose "
                                        "waiter lists would disagree); use a single, Sentinel, Cluster or memory backend";
    return;
  }
  capabilities.conditionUnsupported = condition->conditionUnsupported();
  if (capabilities.conditionUnsupported.empty()) capabilities.condition = std::shared_ptr<IConditionOperator>(backend, condition);
}

// What the lock uses of `backend` beyond IOperator, found here once: ConfigError, saying why, for
// what the options ask and the backend lacks.
detail::LockCapabilities chooseCapabilities(const std::shared_ptr<IOperator>& backend, const LockOptions& options) {
  detail::LockCapabilities capabilities;
  if (options.ownerLabel) {
    auto* recorder = dynamic_cast<IOwnerRecorder*>(backend.get());
    if (recorder == nullptr) {
      throw ConfigError("dlock: LockBuilder: " + backend->describe() + " cannot record an owner label");
    }
    capabilities.ownerRecorder = std::shared_ptr<IOwnerRecorder>(backend, recorder);
  }
  if (options.fair) capabilities.fair = detail::FairBackend::wrap(backend, options);
  chooseCondition(backend, options, capabilities);
  if (auto* renewals = dynamic_cast<IRenewalBatch*>(backend.get())) {
    capabilities.renewalBatch = std::shared_ptr<IRenewalBatch>(backend, renewals);
  }
  return capabilities;
}

// The options every lock checks at build: ConfigError naming the field.
void checkOptions(const std::shared_ptr<IOperator>& backend, const LockOptions& options) {
  if (!backend) throw ConfigError("dlock: LockBuilder: no backend; call backend(...) with an IOperator");
  if (options.outageTolerance.count() < 0) {
    throw ConfigError("dlock: LockBuilder: outageTolerance must not be negative");
  }
  if (options.watchdogLease < std::chrono::milliseconds(3)) {
    throw ConfigError("dlock: LockBuilder: watchdogLease must be at least 3 ms");
  }
  if (options.ownerLabel) {
    if (options.ownerLabel->size() > kMaxOwnerTextBytes) {
      throw ConfigError("dlock: LockBuilder: the ownerLabel text has " + std::to_string(options.ownerLabel->size()) +
                        " bytes, more than the limit of " + std::to_string(kMaxOwnerTextBytes));
    }
    if (options.fair) {
      throw ConfigError("dlock: LockBuilder: a fair lock records no owner label yet; drop ownerLabel() or fair()");
    }
  }
  // The rules every entry point applies, reported as a bad option.
  try {
    if (options.leaseTime) detail::checkLeaseTime(*options.leaseTime, "leaseTime", "LockBuilder");
    detail::checkLeaseTime(options.watchdogLease, "watchdogLease", "LockBuilder");
    detail::checkKey(options.defaultKey, "LockBuilder defaultKey");
  } catch (const InvalidArgumentError& error) {
    throw ConfigError(error.what());
  }
}

}  // namespace

LockBuilder& LockBuilder::backend(std::shared_ptr<IOperator> backend) {
  backend_ = std::move(backend);
  return *this;
}

LockBuilder& LockBuilder::waitStrategy(std::shared_ptr<IWait> wait) {
  wait_ = std::move(wait);
  return *this;
}

LockBuilder& LockBuilder::leaseTime(std::chrono::milliseconds lease) {
  options_.leaseTime = lease;
  return *this;
}

LockBuilder& LockBuilder::outageTolerance(std::chrono::milliseconds tolerance) {
  options_.outageTolerance = tolerance;
  return *this;
}

LockBuilder& LockBuilder::watchdogLease(std::chrono::milliseconds lease) {
  options_.watchdogLease = lease;
  return *this;
}

LockBuilder& LockBuilder::defaultKey(std::string key) {
  options_.defaultKey = std::move(key);
  return *this;
}

LockBuilder& LockBuilder::name(std::string name) {
  options_.name = std::move(name);
  return *this;
}

LockBuilder& LockBuilder::ownerLabel(std::string text) {
  options_.ownerLabel = std::move(text);
  return *this;
}

LockBuilder& LockBuilder::fair(bool fair) {
  options_.fair = fair;
  return *this;
}

LockBuilder& LockBuilder::waiterLease(std::chrono::milliseconds lease) {
  options_.waiterLease = lease;
  return *this;
}

LockBuilder& LockBuilder::clock(std::shared_ptr<Clock> clock) {
  clock_ = std::move(clock);
  return *this;
}

LockBuilder& LockBuilder::watchdog(SharedWatchdog watchdog) {
  watchdog_ = watchdog.host();
  return *this;
}

LockBuilder& LockBuilder::options(LockOptions options) {
  options_ = std::move(options);
  return *this;
}

std::shared_ptr<ILock> LockBuilder::build() const {
  checkOptions(backend_, options_);
  detail::LockCapabilities capabilities = chooseCapabilities(backend_, options_);
  std::shared_ptr<IOperator> backend = capabilities.fair ? capabilities.fair : backend_;  // a fair lock's releases hand off
  auto wait = wait_ ? wait_ : std::make_shared<NotifyWait>();
  auto clock = clock_ ? clock_ : SteadyClock::instance();
  auto watchdogs = detail::sharedOn(watchdog_, clock);
  auto core = std::make_shared<detail::LockCore>(std::move(backend), std::move(capabilities), std::move(wait),
                                                 std::move(clock), options_, std::move(watchdogs));
  return std::make_shared<detail::DistributedLock>(std::move(core));
}

std::shared_ptr<ReadWriteLock> LockBuilder::buildReadWrite() const {
  checkOptions(backend_, options_);
  auto* rw = dynamic_cast<IReadWriteOperator*>(backend_.get());
  if (rw == nullptr) {
    throw ConfigError("dlock: LockBuilder: buildReadWrite needs one queue of readers and writers per key on one "
                      "server; " + backend_->describe() +
                      " has none (Redlock spreads a key over independent servers, whose queues would disagree on "
                      "who is admitted); use a single, Sentinel, Cluster or memory backend");
  }
  const std::string unsupported = rw->readWriteUnsupported();
  if (!unsupported.empty()) throw ConfigError("dlock: LockBuilder: buildReadWrite on " + backend_->describe() + ": " + unsupported);
  if (options_.ownerLabel) throw ConfigError("dlock: LockBuilder: a read-write lock records no owner label; drop ownerLabel()");
  try {
    detail::checkLeaseTime(options_.waiterLease, "waiterLease", "LockBuilder");
  } catch (const InvalidArgumentError& error) {
    throw ConfigError(error.what());
  }
  if (options_.waiterLease < std::chrono::milliseconds(3)) throw ConfigError("dlock: LockBuilder: waiterLease must be at least 3 ms");
  auto clock = clock_ ? clock_ : SteadyClock::instance();
  auto watchdogs = detail::sharedOn(watchdog_, clock);
  return std::make_shared<ReadWriteLock>(
      std::make_shared<detail::ReadWriteCore>(backend_, *rw, std::move(clock), options_, std::move(watchdogs)));
}

}  // namespace dlock
