// SPDX-License-Identifier: Apache-2.0
#include "Fencing.h"

#include <algorithm>

#include "dlock/detail/CallBudget.h"

namespace dlock::detail {

using Steady = std::chrono::steady_clock;

CarriedFence carryFence(RedlockNodes& nodes, const std::string& key, const std::vector<Vote<AcquireResult>>& votes,
                        const std::vector<std::size_t>& taken, Steady::time_point start,
                        std::chrono::milliseconds validFor, std::size_t shard) {
  CarriedFence carried;
  for (std::size_t i : taken) carried.fence = std::max(carried.fence, votes[i].value.fencingToken);
  std::vector<std::size_t> lagging;
  for (std::size_t i : taken) {
    if (votes[i].value.fencingToken < carried.fence) lagging.push_back(i);
  }
  carried.fenced = taken.size() - lagging.size();
  if (lagging.empty()) return carried;
  const std::chrono::milliseconds nodeTimeout = CallBudget::cap(nodes.options().nodeTimeout);
  const Steady::time_point now = Steady::now();
  const bool cutByValidity = start + validFor <= now + nodeTimeout;
  const Steady::time_point raiseBy = cutByValidity ? start + validFor : now + nodeTimeout;
  if (now >= raiseBy) return carried;
  const auto raises = nodes.send<std::uint64_t>(lagging, shard, raiseBy, [key, fence = carried.fence](IOperator& member) {
    return member.raiseFence(key, fence);
  });
  const bool timedOut = raises->waitForAll(raiseBy);
  const auto raised = raises->snapshot();
  for (std::size_t i : lagging) {
    const Vote<std::uint64_t>& vote = raised[i];
    if (vote.state == VoteState::Answered && vote.value >= carried.fence) {
      ++carried.fenced;
    } else if (vote.state == VoteState::Failed || (vote.state == VoteState::Pending && timedOut && !cutByValidity)) {
      ++carried.failed;
    }
  }
  if (carried.fenced < nodes.quorum()) carried.failures = nodes.failuresOf(raised, nodeTimeout);
  return carried;
}

}  // namespace dlock::detail
