// SPDX-License-Identifier: Apache-2.0
// LockOptions.h — the settings of a lock (LockOptions, fixed at build time) and of one
// acquisition (AcquireOptions). Plain values.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "dlock/Cancel.h"

namespace dlock {

struct LockOptions {
  // Lease of each acquisition, at most kMaxLeaseTime. Unset: the watchdog lease below, renewed
  // while held.
  std::optional<std::chrono::milliseconds> leaseTime;
  // Lease under the watchdog, renewed every third of it while held (Redisson's 30 s / 10 s);
  // from 3 ms to kMaxLeaseTime.
  std::chrono::milliseconds watchdogLease{std::chrono::seconds(30)};
  // The key of the overloads without one (java.util.concurrent.locks.Lock has no key).
  std::string defaultKey = "default";
  // The lock's name in stats() and the label of its metrics (dlock::formatMetrics); give each
  // lock a service exports its own.
  std::string name = "default";
  // How long lock(key), which has no timeout, keeps retrying a backend it cannot reach (a
  // failover, a restart) before it throws ConnectionError, so a dead Redis never hangs a service
  // for ever. Waits with a timeout (tryLock(key, t), acquire with a wait) retry within their own
  // timeout instead; tryLock(key) tries once. Zero: lock(key) throws at the first failure.
  std::chrono::milliseconds outageTolerance{std::chrono::seconds(30)};
  // Set: each acquisition also records an owner label for inspect() and `dlock status`: this
  // host's name, the acquiring process's id and this text (at most kMaxOwnerTextBytes; may be
  // empty). Unset (the default): nothing more is written.
  std::optional<std::string> ownerLabel;
  // Strict FIFO across processes and hosts, as java.util.concurrent.locks.ReentrantLock(true):
  // a release hands the key to the longest waiter. Needs a backend with one queue per key
  // (IFairOperator: single, Sentinel, Cluster, memory; not Redlock).
  bool fair = false;
  // A fair waiter's place lasts this long unless renewed; the waiting thread renews it every third
  // of it, so a waiter that died (or a host that vanished) is skipped within this bound. From
  // 3 ms to kMaxLeaseTime.
  std::chrono::milliseconds waiterLease{std::chrono::seconds(5)};
};

struct AcquireOptions {
  // How long to wait for the key. Unset: wait as long as it takes; zero or negative: try once.
  std::optional<std::chrono::milliseconds> waitTime;
  // Lease of this acquisition, at most kMaxLeaseTime. Unset: the lock's LockOptions::leaseTime
  // (or the watchdog).
  std::optional<std::chrono::milliseconds> leaseTime;
  // Ends the wait with InterruptedError once cancelled (Cancel.h); the default never is.
  CancelToken cancel{};
};

}  // namespace dlock
