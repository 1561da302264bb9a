// SPDX-License-Identifier: Apache-2.0
#include "Renewal.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// A node's vote on one lease's renewal.
constexpr signed char kYes = 1, kNo = 0, kCannotTell = -1;
using Flags = std::vector<signed char>;

// The votes of one node, one per lease.
Flags renewOn(IOperator& member, const std::vector<std::pair<std::string, std::string>>& leases, milliseconds ttl,
              bool batch) {
  if (!batch) return {member.extend(leases.front().first, leases.front().second, ttl) ? kYes : kNo};
  std::vector<LeaseRef> refs;
  refs.reserve(leases.size());
  for (const auto& [key, token] : leases) refs.push_back(LeaseRef{key, token});
  const std::vector<ExtendResult> results = member.extendAll(refs, ttl);
  if (results.size() != refs.size()) {
    throw BackendError("dlock: extendAll on " + member.describe() + " returned " + std::to_string(results.size()) +
                       " results for " + std::to_string(refs.size()) + " leases");
  }
  Flags votes;
  votes.reserve(results.size());
  for (const auto& result : results) votes.push_back(result.extended ? kYes : result.unknown ? kCannotTell : kNo);
  return votes;
}

}  // namespace

std::vector<ExtendResult> renewOnQuorum(RedlockNodes& nodes, const std::vector<LeaseRef>& leases, milliseconds ttl,
                                        bool batch) {
  const char* operation = batch ? "extendAll" : "extend";
  const milliseconds validFor = nodes.validityOf(ttl, operation, leases.front().key);
  auto owned = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
  owned->reserve(leases.size());
  for (const auto& lease : leases) owned->emplace_back(std::string(lease.key), std::string(lease.token));

  const Steady::time_point start = Steady::now();
  const milliseconds waited = std::min(nodes.options().nodeTimeout, validFor);
  const auto ballot = nodes.send<Flags>(nodes.all(), nodes.shardOf(leases.front().key), start + waited,
                                        [owned, ttl, batch](IOperator& member) { return renewOn(member, *owned, ttl, batch); });
  // Decided when every lease has a quorum of yes, or too few nodes left to give it one.
  const std::size_t quorum = nodes.quorum();
  (void)nodes.waitDecided(*ballot, start, validFor, start + waited, [&](const std::vector<Vote<Flags>>& votes) {
    for (std::size_t j = 0; j < leases.size(); ++j) {
      std::size_t yes = 0;
      std::size_t no = 0;
      for (const auto& vote : votes) {
        if (vote.state == VoteState::Answered) {
          yes += vote.value[j] == kYes ? 1 : 0;
          no += vote.value[j] == kYes ? 0 : 1;  // a node's "cannot tell" is final for this round
        } else if (vote.state == VoteState::Failed) {
          ++no;
        }
      }
      if (yes < quorum && no <= nodes.size() - quorum) return false;
    }
    return true;
  });
  const auto votes = ballot->snapshot();
  const bool valid = Steady::now() - start < validFor;

  // Per lease: extended on a quorum; not held by a quorum even counting the nodes that could
  // not tell (lost); or undecided, which a batch reports as unknown for that lease alone.
  std::vector<ExtendResult> result(leases.size());
  std::optional<std::size_t> undecided;
  for (std::size_t j = 0; j < leases.size(); ++j) {
    std::size_t yes = 0;
    std::size_t cannotTell = 0;
    for (const auto& vote : votes) {
      const bool answered = vote.state == VoteState::Answered;
      yes += answered && vote.value[j] == kYes ? 1 : 0;
      cannotTell += !answered || vote.value[j] == kCannotTell ? 1 : 0;
    }
    if (!valid) continue;  // the extension may already have run out somewhere: lost
    if (yes >= quorum) {
      result[j] = ExtendResult{true, false, validFor};
    } else if (yes + cannotTell >= quorum) {
      result[j].unknown = true;
      if (!undecided) undecided = j;
    }
  }
  if (undecided && !batch) {
    nodes.throwUndecided(operation, leases[*undecided].key,
                         "too few nodes answered to tell whether a quorum still holds the lease",
                         nodes.failuresOf(votes, waited));
  }
  return result;
}

}  // namespace dlock::detail
