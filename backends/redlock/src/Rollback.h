// SPDX-License-Identifier: Apache-2.0
// Rollback.h — undoing an acquisition that did not get its quorum: the key is released on every
// node, so no partial hold blocks the others, and the nodes where our key may survive (the
// release not confirmed there) become suspects until the lease would have ended. Also when a
// quorum is expected to be free again, for the caller's next attempt.
// Thread safety: as RedlockNodes and Suspects.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>
#include <vector>

#include "Ballot.h"
#include "RedlockNodes.h"
#include "Suspects.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

struct Rollback {
  std::vector<Vote<AcquireResult>> acquires;  // the attempt's votes, late answers included
  std::vector<Vote<ReleaseResult>> releases;
};

// Releases (key, token) on every node after a failed attempt, and waits (at most the node
// timeout) for the nodes whose acquire took the key or had not answered when the attempt was
// decided (`decidedOn`). A release reaches each node after that node's acquire (same worker
// thread), so once it has answered, the acquire's outcome is known too.
Rollback rollBack(RedlockNodes& nodes, Suspects& suspects, std::string_view key, std::string_view token,
                  const Ballot<AcquireResult>& acquires, const std::vector<Vote<AcquireResult>>& decidedOn,
                  std::chrono::steady_clock::time_point start, std::chrono::milliseconds ttl, std::size_t shard);

// When the key is expected to be free on a quorum after `rollback`: nodes it released (or that
// our acquire had and the release reached) are free, a holder's node after its TTL; other nodes
// are unknown. 0 when unknown; at least 1 ms.
std::chrono::milliseconds quorumFreeIn(const Rollback& rollback, std::size_t quorum);

}  // namespace dlock::detail
