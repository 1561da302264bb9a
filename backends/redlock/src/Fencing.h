// SPDX-License-Identifier: Apache-2.0
// Fencing.h — how a Redlock acquisition's fencing token stays monotonic across quorums.
//
// Each node keeps its own counter, and those are not comparable with one another. An
// acquisition takes the highest token F among the nodes of its quorum and raises the counter of
// every node of the quorum that is below F to F before it returns, so when it returns a quorum
// has counters >= F (a node whose raise fails does not count; without a quorum the attempt is
// undone). A later acquisition's quorum overlaps that quorum in at least one node (two sets of
// N/2 + 1 out of N always share a node); its acquire there increments that node's counter past
// F, and since it takes the maximum over its own quorum, its token is > F. Counters never go
// down (INCR and raiseFence only raise them) as long as the nodes keep their data: a node that
// restarts without persistence forgets its counters (see the README).
// Thread safety: as RedlockNodes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "Ballot.h"
#include "RedlockNodes.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

struct CarriedFence {
  std::uint64_t fence = 0;            // the highest token of the quorum
  std::size_t fenced = 0;             // nodes of `taken` whose counter is at least `fence` now
  std::size_t failed = 0;             // nodes whose raise failed (or timed out)
  std::optional<Failures> failures;   // why, when fewer than a quorum are fenced
};

// Takes the highest token among the `taken` nodes' votes and raises the counters of the others
// to it, by the end of the validity or the node timeout, whichever comes first.
CarriedFence carryFence(RedlockNodes& nodes, const std::string& key, const std::vector<Vote<AcquireResult>>& votes,
                        const std::vector<std::size_t>& taken, std::chrono::steady_clock::time_point start,
                        std::chrono::milliseconds validFor, std::size_t shard);

}  // namespace dlock::detail
