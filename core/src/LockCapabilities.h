// SPDX-License-Identifier: Apache-2.0
// LockCapabilities.h — what a lock uses of its backend beyond IOperator, chosen once when the lock
// is built (LockBuilder::build: asking for one the backend lacks is a ConfigError there) and
// handed to LockCore as a value, never looked up per call.
// Thread safety: a plain value; what it points to is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "FairBackend.h"
#include "dlock/IConditionOperator.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/IRenewalBatch.h"

namespace dlock::detail {

struct LockCapabilities {
  std::shared_ptr<FairBackend> fair;              // the fair queue (then also the lock's backend); null: not fair
  std::shared_ptr<IOwnerRecorder> ownerRecorder;  // when an owner label is recorded; else null
  // The conditions of the lock's keys (Condition.h); null with the reason when the backend keeps none.
  std::shared_ptr<IConditionOperator> condition;
  ConditionLock conditionLock = ConditionLock::Exclusive;  // Fair for the fair lock
  std::string conditionUnsupported;
  // Every kind's renewal in one call, for a watchdog shared with other primitives; null: none.
  std::shared_ptr<IRenewalBatch> renewalBatch;
};

}  // namespace dlock::detail
