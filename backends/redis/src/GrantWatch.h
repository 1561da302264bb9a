// SPDX-License-Identifier: Apache-2.0
// GrantWatch.h — hand-off messages to this process's waiters (the fair lock's, the read-write
// lock's): the process's listener, which each waiter's place names so that a hand-off is published
// to the heir's process alone, and the watch of one waiter's channel, following its key to another
// node. Thread safety: grantListener() is per thread and process; a watch serves one waiter.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "dlock/IFairOperator.h"

namespace dlock::detail {

class Topology;

// "0", 17 random digits, the pid: digits only, and a fraction below 0.1 in a place's ttl field.
const std::string& grantListener();

// The hand-offs to `token` on `channel` (a key's grant channel and this process's listener), on
// the node serving `slot`; a grant whose fence is below `minFence` is not read as one (Recheck).
std::unique_ptr<IGrantWatch> watchGrantChannel(const std::shared_ptr<Topology>& topology,
                                               std::chrono::milliseconds budget, std::uint16_t slot,
                                               std::string channel, std::string token, std::uint64_t minFence);

}  // namespace dlock::detail
