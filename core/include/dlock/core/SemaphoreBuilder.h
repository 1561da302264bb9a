// SPDX-License-Identifier: Apache-2.0
// SemaphoreBuilder.h — assembles a Semaphore (Semaphore.h) from a backend, a name and a capacity.
//
//   auto sem = dlock::SemaphoreBuilder()
//                  .backend(dlock::connect("redis://127.0.0.1:6379"))
//                  .name("payments-api")
//                  .permits(8)                 // the capacity, stored with the semaphore
//                  .build();
//
// Defaults: the watchdog with a 30 s lease, a 5 s waiter lease, the steady clock. Plain value;
// build() may be called more than once, each time making an independent semaphore. build() sends
// nothing: a capacity stored on the backend that differs is a ConfigError at the first acquire.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/Clock.h"
#include "dlock/IOperator.h"
#include "dlock/LockOptions.h"
#include "dlock/core/SharedWatchdog.h"
#include "dlock/core/Semaphore.h"

namespace dlock {

class SemaphoreBuilder {
 public:
  SemaphoreBuilder() = default;

  // A backend that keeps semaphores (ISemaphoreOperator): single, Sentinel, Cluster, memory.
  SemaphoreBuilder& backend(std::shared_ptr<IOperator> backend);
  // The semaphore's name: any key (Validation.h), shared by every user of the semaphore.
  SemaphoreBuilder& name(std::string name);
  // The capacity: from 1 to kMaxSemaphorePermits.
  SemaphoreBuilder& permits(std::uint32_t capacity);
  // A fixed lease for every acquisition, not renewed; leave unset to use the watchdog.
  SemaphoreBuilder& leaseTime(std::chrono::milliseconds lease);
  // The lease the watchdog keeps renewing, every third of it (default 30 s).
  SemaphoreBuilder& watchdogLease(std::chrono::milliseconds lease);
  // How long a waiter's place lasts unrenewed; renewed every third of it (default 5 s).
  SemaphoreBuilder& waiterLease(std::chrono::milliseconds lease);
  // How long an acquire without a wait time rides out an unreachable backend (LockOptions).
  SemaphoreBuilder& outageTolerance(std::chrono::milliseconds tolerance);
  // The clock of lease deadlines and the watchdog; a VirtualClock in tests.
  SemaphoreBuilder& clock(std::shared_ptr<Clock> clock);
  // Renews on `watchdog` (SharedWatchdog.h) with the other primitives given it, when built on its
  // clock; by default, and with another clock, what is built has a watchdog of its own.
  SemaphoreBuilder& watchdog(SharedWatchdog watchdog);

  // ConfigError when no backend was given, the backend keeps no semaphores (Redlock: why), or an
  // option is out of range (a lease not positive or above kMaxLeaseTime, a watchdog or waiter
  // lease under 3 ms); InvalidArgumentError for a bad name or a capacity of 0 or above
  // kMaxSemaphorePermits. Nothing is sent.
  [[nodiscard]] std::shared_ptr<Semaphore> build() const;

 private:
  std::shared_ptr<IOperator> backend_;
  std::string name_;
  std::uint32_t capacity_ = 0;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<detail::WatchdogHost> watchdog_;  // SharedWatchdog::host(); null: its own
  LockOptions options_;
};

}  // namespace dlock
