// SPDX-License-Identifier: Apache-2.0
// SharedWatchdog.h — one lease watchdog (one thread) for several primitives. Given to
// LockBuilder::watchdog and SemaphoreBuilder::watchdog, everything they build renews its leases
// on it: at each tick the leases due of every kind (exclusive, fair, read and write holds,
// permits, a Condition's waiters) go in one renewal per backend (one round trip per node on
// Redis), each by its own script for its own lease, and each primitive keeps its own lost
// handler, stats and warnings. dlock::Client gives its own to everything it hands out.
//
//   dlock::SharedWatchdog watchdog;                                   // the steady clock
//   auto orders = dlock::LockBuilder().backend(backend).name("orders").watchdog(watchdog).build();
//   auto api = dlock::SemaphoreBuilder().backend(backend).name("api").permits(4).watchdog(watchdog).build();
//
// The thread starts with the first lease renewed and ends with the last of the SharedWatchdog's
// copies and the primitives built with it. A primitive closed or destroyed stops its own leases'
// renewals only. A forked child has a thread of its own, started by its first renewed hold.
// Owner: a value; copies share one watchdog. Thread safety: thread-safe.
#pragma once

#include <memory>

#include "dlock/Clock.h"

namespace dlock {
namespace detail {
struct WatchdogHost;
}  // namespace detail

class SharedWatchdog {
 public:
  // On `clock` (null: the steady clock), which must be the clock of every primitive it serves: a
  // builder given another clock keeps a watchdog of its own.
  explicit SharedWatchdog(std::shared_ptr<Clock> clock = nullptr);

  [[nodiscard]] const std::shared_ptr<Clock>& clock() const noexcept;
  // For the builders.
  [[nodiscard]] const std::shared_ptr<detail::WatchdogHost>& host() const noexcept { return host_; }

 private:
  std::shared_ptr<detail::WatchdogHost> host_;
};

}  // namespace dlock
