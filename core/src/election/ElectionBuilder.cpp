// SPDX-License-Identifier: Apache-2.0
#include <utility>

#include "ElectionCore.h"
#include "dlock/IElectionOperator.h"
#include "dlock/IFairOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Election.h"
#include "dlock/core/LockBuilder.h"

namespace dlock {

ElectionBuilder& ElectionBuilder::backend(std::shared_ptr<IOperator> backend) {
  backend_ = std::move(backend);
  return *this;
}

ElectionBuilder& ElectionBuilder::name(std::string name) {
  name_ = std::move(name);
  return *this;
}

ElectionBuilder& ElectionBuilder::lease(std::chrono::milliseconds lease) {
  lease_ = lease;
  return *this;
}

ElectionBuilder& ElectionBuilder::candidateLease(std::chrono::milliseconds lease) {
  candidateLease_ = lease;
  return *this;
}

ElectionBuilder& ElectionBuilder::clock(std::shared_ptr<Clock> clock) {
  clock_ = std::move(clock);
  return *this;
}

ElectionBuilder& ElectionBuilder::watchdog(SharedWatchdog watchdog) {
  watchdog_ = std::move(watchdog);
  return *this;
}

std::shared_ptr<Election> ElectionBuilder::build() const {
  if (!backend_) throw ConfigError("dlock: ElectionBuilder: no backend given");
  if (name_.empty()) throw ConfigError("dlock: ElectionBuilder: no name given");
  const std::string key = "election:" + name_;
  try {
    detail::checkKey(key, "ElectionBuilder");
  } catch (const InvalidArgumentError& error) {
    throw ConfigError(std::string("dlock: ElectionBuilder: the name: ") + error.what());
  }
  auto* records = dynamic_cast<IElectionOperator*>(backend_.get());
  auto* queue = dynamic_cast<IFairOperator*>(backend_.get());
  if (records == nullptr || queue == nullptr) {
    // Redlock's servers are independent: no one of them orders the candidates or holds the one
    // record of who leads, and a quorum cannot hand a term on in one script.
    throw ConfigError("dlock: election " + detail::quoteKey(name_) + " on " + backend_->describe() +
                      ": an election needs one queue of candidates and one leader record per name, which a "
                      "backend of independent servers (Redlock) cannot keep; use a single, Sentinel or Cluster "
                      "backend");
  }
  std::shared_ptr<Clock> clock = clock_;
  if (!clock && watchdog_) clock = watchdog_->clock();
  if (!clock) clock = SteadyClock::instance();
  // The fair lock checks the leases' range and the queue's support (ConfigError naming them).
  LockBuilder builder;
  builder.backend(backend_)
      .fair()
      .watchdogLease(lease_)
      .waiterLease(candidateLease_.value_or(lease_))
      .name(key)
      .clock(clock);
  if (watchdog_) builder.watchdog(*watchdog_);
  auto core = std::make_shared<detail::ElectionCore>(name_, backend_, *records, builder.build(), clock);
  core->start();
  return std::shared_ptr<Election>(new Election(std::move(core)));
}

}  // namespace dlock
