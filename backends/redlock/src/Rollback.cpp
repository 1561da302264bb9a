// SPDX-License-Identifier: Apache-2.0
#include "Rollback.h"

#include <algorithm>
#include <string>

#include "dlock/detail/CallBudget.h"

namespace dlock::detail {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

Rollback rollBack(RedlockNodes& nodes, Suspects& suspects, std::string_view key, std::string_view token,
                  const Ballot<AcquireResult>& acquires, const std::vector<Vote<AcquireResult>>& decidedOn,
                  Steady::time_point start, milliseconds ttl, std::size_t shard) {
  auto releases = nodes.send<ReleaseResult>(nodes.all(), shard, std::nullopt,
                                            [k = std::string(key), t = std::string(token)](IOperator& member) {
                                              return member.unlock(k, t);
                                            });
  (void)releases->wait(Steady::now() + CallBudget::cap(nodes.options().nodeTimeout), [&](const auto& votes) {
    for (std::size_t i = 0; i < votes.size(); ++i) {
      const Vote<AcquireResult>& vote = decidedOn[i];
      const bool mayHoldIt = vote.state == VoteState::Pending || (vote.state == VoteState::Answered && vote.value.acquired);
      if (mayHoldIt && votes[i].state == VoteState::Pending) return false;
    }
    return true;
  });
  Rollback result{acquires.snapshot(), releases->snapshot()};
  std::vector<std::size_t> lingering;
  for (std::size_t i = 0; i < result.acquires.size(); ++i) {
    const Vote<AcquireResult>& acquire = result.acquires[i];
    const Vote<ReleaseResult>& release = result.releases[i];
    const bool deleted = release.state == VoteState::Answered && release.value.released;
    switch (acquire.state) {
      case VoteState::NotAsked:
        break;
      case VoteState::Answered:
        // The acquire finished, so a release that answered settled it.
        if (acquire.value.acquired && release.state != VoteState::Answered) lingering.push_back(i);
        break;
      case VoteState::Failed:
        // It may have landed before it failed (a timeout): only a release that deleted it is sure.
        if (!acquire.unsent && !deleted) lingering.push_back(i);
        break;
      case VoteState::Pending:
        if (!deleted) lingering.push_back(i);
        break;
    }
  }
  if (!lingering.empty()) suspects.add(key, token, lingering, start + ttl);
  return result;
}

milliseconds quorumFreeIn(const Rollback& rollback, std::size_t quorum) {
  std::vector<milliseconds> known;
  for (std::size_t i = 0; i < rollback.acquires.size(); ++i) {
    const Vote<AcquireResult>& acquire = rollback.acquires[i];
    const Vote<ReleaseResult>& release = rollback.releases[i];
    const bool answered = acquire.state == VoteState::Answered;
    if (release.state == VoteState::Answered && (release.value.released || (answered && acquire.value.acquired))) {
      known.push_back(milliseconds(0));
    } else if (answered && !acquire.value.acquired && acquire.value.holderTtl.count() > 0) {
      known.push_back(acquire.value.holderTtl);
    }
  }
  if (known.size() < quorum) return milliseconds(0);
  std::nth_element(known.begin(), known.begin() + static_cast<std::ptrdiff_t>(quorum - 1), known.end());
  return std::max(known[quorum - 1], milliseconds(1));
}

}  // namespace dlock::detail
