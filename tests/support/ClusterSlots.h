// SPDX-License-Identifier: Apache-2.0
// ClusterSlots.h — what one cluster node says about the slots (CLUSTER SLOTS), for the helpers
// that wait for a cluster to form or fail over: tests/support/ClusterServers and the fault
// tests' ClusterDeployment.
#pragma once

#include <tuple>
#include <vector>

#include "RedisClient.h"

namespace dlock::test {

// (first, last, master's port as the node names it) per range, sorted.
using SlotView = std::vector<std::tuple<long long, long long, long long>>;

// CLUSTER SLOTS through `client`; std::runtime_error on a reply of another shape.
[[nodiscard]] SlotView slotView(RedisClient& client);

// Whether the ranges cover all 16384 slots without a gap.
[[nodiscard]] bool coversAllSlots(const SlotView& view);

}  // namespace dlock::test
