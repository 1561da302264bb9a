// SPDX-License-Identifier: Apache-2.0
// Renewal.h — renewing leases on a quorum: every node votes per lease yes (extended), no (not
// ours there) or cannot tell, and each lease's outcome is its own: extended on a quorum in time
// (valid for ttl - drift from the start, as an acquisition is), lost (no quorum even counting
// the nodes that could not tell), or unknown. A node's failure touches only the leases whose
// quorum it could have made.
// Thread safety: as RedlockNodes.
#pragma once

#include <chrono>
#include <vector>

#include "RedlockNodes.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

// One call per node: `batch` uses the members' extendAll, else their extend (one lease). A single
// lease left undecided throws as throwUndecided does; a batch reports it unknown.
std::vector<ExtendResult> renewOnQuorum(RedlockNodes& nodes, const std::vector<LeaseRef>& leases,
                                        std::chrono::milliseconds ttl, bool batch);

}  // namespace dlock::detail
