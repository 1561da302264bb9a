// Fixtures.h — building blocks of the unit suite: a lock over a MemoryOperator on a clock the
// test controls.
#pragma once

#include <chrono>
#include <memory>

#include "dlock/core/LockBuilder.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

namespace dlock::test {

using namespace std::chrono_literals;

struct VirtualFixture {
  std::shared_ptr<VirtualClock> clock = std::make_shared<VirtualClock>();
  std::shared_ptr<MemoryOperator> backend = std::make_shared<MemoryOperator>(clock);

  // A lock with a fixed lease (no watchdog).
  std::shared_ptr<ILock> leased(std::chrono::milliseconds lease) const {
    return LockBuilder().backend(backend).clock(clock).leaseTime(lease).build();
  }
  // A lock kept alive by the watchdog.
  std::shared_ptr<ILock> watched(std::chrono::milliseconds lease) const {
    return LockBuilder().backend(backend).clock(clock).watchdogLease(lease).build();
  }
};

}  // namespace dlock::test
