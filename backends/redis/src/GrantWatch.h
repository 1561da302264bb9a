// SPDX-License-Identifier: Apache-2.0
// GrantWatch.h — how a waiter of a queue-based primitive (the fair lock, the semaphore) hears that
// it was admitted: its process's listener, which names the grant channel its scripts publish to
// (`<channel>:<listener>`), the message `token|fence|now-ms|claim-ms`, and a watch that follows the
// name's slot to whichever node serves it now.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "Topology.h"
#include "dlock/IFairOperator.h"

namespace dlock::detail {

// This process's listener: "0", 17 random digits, the pid (digits only, so it reads as a fraction
// below 0.1 in a fair place's ttl field). Redone in a forked child.
const std::string& grantListener();

// A grant message for the watched token: Granted with its fields, or Recheck when unreadable.
Grant readGrant(std::string_view payload);

// The grant watch of `token` on `channel` (its listener's), served where `slot` lives;
// `budget` bounds each (re)subscription as the release watch's.
std::unique_ptr<IGrantWatch> watchGrantsOn(const std::shared_ptr<Topology>& topology, std::chrono::milliseconds budget,
                                           std::uint16_t slot, std::string channel, std::string token);

}  // namespace dlock::detail
