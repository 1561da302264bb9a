// SPDX-License-Identifier: Apache-2.0
// WatchdogHost.h — the watchdog thread several primitives share (behind SharedWatchdog.h): one
// per process, so a forked child makes its own at its first use there (the parent's thread does
// not exist in it) and renews only the child's leases. `clock` is every sharer's.
// Owner: shared (a SharedWatchdog, the primitives built with it). Thread safety: thread-safe.
#pragma once

#include <memory>
#include <utility>

#include "WatchdogThread.h"
#include "dlock/Clock.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

struct WatchdogHost {
  explicit WatchdogHost(std::shared_ptr<Clock> clockIn)
      : clock(std::move(clockIn)), thread([clock = clock] { return std::make_shared<WatchdogThread>(clock); }) {}
  WatchdogHost(const WatchdogHost&) = delete;
  WatchdogHost& operator=(const WatchdogHost&) = delete;

  const std::shared_ptr<Clock> clock;
  ForkLocal<WatchdogThread> thread;
};

// `host` when what a builder makes runs on its clock; null otherwise (a watchdog of its own).
inline std::shared_ptr<WatchdogHost> sharedOn(const std::shared_ptr<WatchdogHost>& host,
                                              const std::shared_ptr<Clock>& clock) {
  return host && host->clock == clock ? host : nullptr;
}

}  // namespace dlock::detail
