// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/SharedWatchdog.h"

#include <utility>

#include "WatchdogHost.h"

namespace dlock {

SharedWatchdog::SharedWatchdog(std::shared_ptr<Clock> clock)
    : host_(std::make_shared<detail::WatchdogHost>(clock ? std::move(clock) : SteadyClock::instance())) {}

const std::shared_ptr<Clock>& SharedWatchdog::clock() const noexcept { return host_->clock; }

}  // namespace dlock
