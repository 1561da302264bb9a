// SPDX-License-Identifier: Apache-2.0
// LockBuilder.h — assembles an ILock from a backend (IOperator), a wait strategy and options.
//
//   auto lock = dlock::LockBuilder()
//                   .backend(dlock::connect("redis://127.0.0.1:6379"))
//                   .leaseTime(std::chrono::seconds(10))     // omit for the watchdog
//                   .build();
//
// Defaults: NotifyWait, the watchdog with a 30 s lease, default key "default", the steady clock.
// Plain value; build() may be called more than once, each time making an independent lock.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dlock/Clock.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/IWait.h"
#include "dlock/LockOptions.h"
#include "dlock/core/SharedWatchdog.h"
#include "dlock/core/ReadWriteLock.h"

namespace dlock {

class LockBuilder {
 public:
  LockBuilder() = default;

  LockBuilder& backend(std::shared_ptr<IOperator> backend);
  LockBuilder& waitStrategy(std::shared_ptr<IWait> wait);
  // A fixed lease for every acquisition, not renewed; leave unset to use the watchdog.
  LockBuilder& leaseTime(std::chrono::milliseconds lease);
  // The lease the watchdog keeps renewing, every third of it (default 30 s).
  LockBuilder& watchdogLease(std::chrono::milliseconds lease);
  // How long lock(key) without a timeout rides out an unreachable backend (LockOptions).
  LockBuilder& outageTolerance(std::chrono::milliseconds tolerance);
  LockBuilder& defaultKey(std::string key);
  // The lock's name in stats() and its metrics' label (LockOptions::name, default "default").
  LockBuilder& name(std::string name);
  // Records who holds each lease, shown by inspect() and `dlock status`: "host=<name> pid=<id>",
  // then `text` when given (LockOptions::ownerLabel). The backend adds when it granted the lease.
  // Off by default: a lock without it writes nothing more than the lease.
  LockBuilder& ownerLabel(std::string text = {});
  // Strict FIFO hand-off (LockOptions::fair), as java.util.concurrent.locks.ReentrantLock(true).
  LockBuilder& fair(bool fair = true);
  // How long a fair waiter's place lasts unrenewed (LockOptions::waiterLease, default 5 s).
  LockBuilder& waiterLease(std::chrono::milliseconds lease);
  // The clock of lease deadlines and the watchdog; a VirtualClock in tests.
  LockBuilder& clock(std::shared_ptr<Clock> clock);
  // Renews on `watchdog` (SharedWatchdog.h) with the other primitives given it, when built on its
  // clock; by default, and with another clock, what is built has a watchdog of its own.
  LockBuilder& watchdog(SharedWatchdog watchdog);
  LockBuilder& options(LockOptions options);

  // ConfigError when no backend was given or an option is out of range (a lease time not
  // positive or above kMaxLeaseTime, a watchdog or waiter lease under 3 ms, a bad default key, an
  // owner label's text above kMaxOwnerTextBytes or a backend that cannot record one), or
  // fair(true) on a backend without one queue per key (Redlock).
  [[nodiscard]] std::shared_ptr<ILock> build() const;

  // A read-write lock (ReadWriteLock.h) with these options (fair() does not apply: it is always
  // fair, with writer preference; the wait strategy neither: its waiters hear grants). ConfigError
  // as build(), when the backend has no read-write queue (Redlock: no one queue per name), or
  // with an owner label.
  [[nodiscard]] std::shared_ptr<ReadWriteLock> buildReadWrite() const;

 private:
  std::shared_ptr<IOperator> backend_;
  std::shared_ptr<IWait> wait_;
  std::shared_ptr<Clock> clock_;
  std::shared_ptr<detail::WatchdogHost> watchdog_;  // SharedWatchdog::host(); null: its own
  LockOptions options_;
};

}  // namespace dlock
