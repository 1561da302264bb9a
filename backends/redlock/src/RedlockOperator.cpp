// SPDX-License-Identifier: Apache-2.0
#include "dlock/redlock/RedlockOperator.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "Ballot.h"
#include "Fencing.h"
#include "PartialReleases.h"
#include "RedlockNodes.h"
#include "RedlockWatch.h"
#include "Renewal.h"
#include "Rollback.h"
#include "Suspects.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;
using detail::Ballot;
using detail::Failures;
using detail::Vote;
using detail::VoteState;

constexpr std::size_t kMaxThreadsPerNode = 64;

long long millisOf(Steady::duration duration) {
  return std::chrono::duration_cast<milliseconds>(duration).count();
}

}  // namespace

class RedlockOperator::Impl {
 public:
  Impl(std::vector<std::shared_ptr<IOperator>> members, RedlockOptions options)
      : log(detail::logger()),
        suspects([count = members.size()] { return std::make_shared<detail::Suspects>(count); }),
        partialReleases([count = members.size()] { return std::make_shared<detail::PartialReleases>(count); }),
        nodes(std::move(members), options) {}

  const detail::Log log;
  // Per process: a forked child starts with none (a parent's thread may have held their mutex).
  detail::ForkLocal<detail::Suspects> suspects;
  detail::ForkLocal<detail::PartialReleases> partialReleases;
  // Last: its worker threads are joined first.
  detail::RedlockNodes nodes;
};

namespace {

RedlockOptions checkedOptions(const std::vector<std::shared_ptr<IOperator>>& members, RedlockOptions options) {
  if (members.size() < 3) {
    throw ConfigError("dlock: redlock needs at least 3 nodes (5 recommended), got " + std::to_string(members.size()));
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!members[i]) throw ConfigError("dlock: redlock node " + std::to_string(i) + " is null");
    // Tokens stay monotonic across quorums only if each node's counter can be raised.
    if (dynamic_cast<IFenceRaiser*>(members[i].get()) == nullptr) {
      throw ConfigError("dlock: redlock node " + std::to_string(i) + " (" + members[i]->describe() +
                        ") cannot raise a fencing counter (IFenceRaiser), which redlock needs of every node");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (members[i] == members[j]) {
        throw ConfigError("dlock: redlock nodes " + std::to_string(j) + " and " + std::to_string(i) +
                          " are the same operator (" + members[i]->describe() + ")");
      }
    }
  }
  if (options.nodeTimeout.count() <= 0) {
    throw ConfigError("dlock: RedlockOptions::nodeTimeout must be positive, got " +
                      std::to_string(options.nodeTimeout.count()) + " ms");
  }
  if (!(options.clockDriftFactor >= 0.0 && options.clockDriftFactor < 1.0)) {
    throw ConfigError("dlock: RedlockOptions::clockDriftFactor must be in [0, 1), got " +
                      std::to_string(options.clockDriftFactor));
  }
  if (options.clockDriftMargin.count() < 0) {
    throw ConfigError("dlock: RedlockOptions::clockDriftMargin must not be negative, got " +
                      std::to_string(options.clockDriftMargin.count()) + " ms");
  }
  if (options.threadsPerNode == 0 || options.threadsPerNode > kMaxThreadsPerNode) {
    throw ConfigError("dlock: RedlockOptions::threadsPerNode must be from 1 to " +
                      std::to_string(kMaxThreadsPerNode) + ", got " + std::to_string(options.threadsPerNode));
  }
  return options;
}

}  // namespace

RedlockOperator::RedlockOperator(std::vector<std::shared_ptr<IOperator>> members, RedlockOptions options) {
  options = checkedOptions(members, options);
  impl_ = std::make_unique<Impl>(std::move(members), options);
}

RedlockOperator::~RedlockOperator() = default;

// Decided by a quorum of yes or a certain failure; after a yes the other nodes still get their
// chance (the stragglers' time), so the key and the fencing token end up on as many nodes as
// possible. Fencing: see Fencing.h; undoing a partial hold: Rollback.h.
AcquireResult RedlockOperator::lock(std::string_view key, std::string_view token, milliseconds ttl) {
  return acquire(key, token, ttl, nullptr);
}

AcquireResult RedlockOperator::lockRecordingOwner(std::string_view key, std::string_view token, milliseconds ttl,
                                                  std::string_view label) {
  detail::checkOwnerLabel(label, "lock");
  return acquire(key, token, ttl, &label);
}

AcquireResult RedlockOperator::acquire(std::string_view key, std::string_view token, milliseconds ttl,
                                       const std::string_view* label) {
  detail::RedlockNodes& nodes = impl_->nodes;
  const std::size_t quorum = nodes.quorum();
  const milliseconds validFor = nodes.validityOf(ttl, "lock", key);
  const Steady::time_point start = Steady::now();
  // Waiting past the validity is pointless: then the attempt has failed on time, not on the nodes.
  // A node's time, cut to what is left of the caller's wait (CallBudget).
  const milliseconds nodeTimeout = detail::CallBudget::cap(nodes.options().nodeTimeout);
  const bool cutByValidity = validFor <= nodeTimeout;
  const milliseconds waited = std::min(nodeTimeout, validFor);
  const std::vector<bool> suspect = impl_->suspects->of(key, token, start);
  const std::size_t shard = nodes.shardOf(key);
  const std::string ownedKey(key);

  const auto counts = [&](const Vote<AcquireResult>& vote, std::size_t i) {
    return vote.state == VoteState::Answered && vote.value.acquired && !suspect[i];
  };
  const std::optional<std::string> ownedLabel = label != nullptr ? std::optional<std::string>(*label) : std::nullopt;
  const auto acquires = nodes.send<AcquireResult>(
      nodes.all(), shard, start + waited,
      [k = ownedKey, t = std::string(token), ttl, l = ownedLabel](IOperator& member) {
        auto* recorder = l ? dynamic_cast<IOwnerRecorder*>(&member) : nullptr;
        return recorder != nullptr ? recorder->lockRecordingOwner(k, t, ttl, *l) : member.lock(k, t, ttl);
      });
  const bool timedOut =
      nodes.waitDecided(*acquires, start, validFor, start + waited, [&](const std::vector<Vote<AcquireResult>>& votes) {
        std::size_t yes = 0;
        std::size_t no = 0;
        for (std::size_t i = 0; i < votes.size(); ++i) {
          if (counts(votes[i], i)) {
            ++yes;
          } else if (votes[i].state != VoteState::Pending) {
            ++no;
          }
        }
        return yes >= quorum || no > nodes.size() - quorum;
      });
  const std::vector<Vote<AcquireResult>> votes = acquires->snapshot();
  // Nodes still pending at the deadline failed, unless the deadline was the validity's.
  const bool pendingFailed = timedOut && !cutByValidity;

  std::vector<std::size_t> taken;  // nodes that count toward the quorum
  std::size_t failed = 0;          // nodes that could not answer
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (counts(votes[i], i)) taken.push_back(i);
    if (votes[i].state == VoteState::Failed || (votes[i].state == VoteState::Pending && pendingFailed)) ++failed;
  }

  const char* why = "the key is held elsewhere";
  std::optional<Failures> raiseFailures;
  if (taken.size() >= quorum) {
    const detail::CarriedFence carried = detail::carryFence(nodes, ownedKey, votes, taken, start, validFor, shard);
    failed += carried.failed;
    raiseFailures = carried.failures;
    const Steady::duration elapsed = Steady::now() - start;
    if (carried.fenced >= quorum && elapsed < validFor) {
      if (std::find(suspect.begin(), suspect.end(), true) != suspect.end()) impl_->suspects->forget(key, token);
      if (impl_->log->should_log(spdlog::level::debug)) {
        impl_->log->debug("dlock: redlock acquired {} on {} of {} nodes (fencing token {}, {} ms of {} ms used)",
                          detail::quoteKey(key), taken.size(), nodes.size(), carried.fence, millisOf(elapsed),
                          ttl.count());
      }
      AcquireResult result;
      result.acquired = true;
      result.fencingToken = carried.fence;
      result.validity = validFor;  // from `start`: the nodes' leases began no earlier
      return result;
    }
    why = elapsed >= validFor ? "the validity time ran out" : "the fencing token could not be carried to a quorum";
  } else if (timedOut && cutByValidity) {
    why = "the validity time ran out";
  }

  // Not acquired: release on every node, so no partial hold blocks the others.
  const detail::Rollback undone = detail::rollBack(nodes, *impl_->suspects, key, token, *acquires, votes, start, ttl, shard);
  if (failed > nodes.size() - quorum) {
    Failures failures = nodes.failuresOf(votes, waited);
    if (raiseFailures) failures.add(*raiseFailures);
    nodes.throwUndecided("lock", key,
                         std::to_string(failed) + " nodes could not answer, so no quorum of " + std::to_string(quorum) +
                             " was possible",
                         failures);
  }
  AcquireResult result;
  result.holderTtl = detail::quorumFreeIn(undone, quorum);
  if (impl_->log->should_log(spdlog::level::debug)) {
    impl_->log->debug("dlock: redlock did not acquire {} ({} of {} nodes, quorum {}): {}; free in {} ms",
                      detail::quoteKey(key), taken.size(), nodes.size(), quorum, why, result.holderTtl.count());
  }
  return result;
}

ReleaseResult RedlockOperator::unlock(std::string_view key, std::string_view token) { return release(key, token, false); }

// Every member cancels: an acquire of the token still on its way to any of them is refused there.
ReleaseResult RedlockOperator::cancel(std::string_view key, std::string_view token) { return release(key, token, true); }

ReleaseResult RedlockOperator::release(std::string_view key, std::string_view token, bool cancel) {
  detail::RedlockNodes& nodes = impl_->nodes;
  const milliseconds waited = detail::CallBudget::cap(nodes.options().nodeTimeout);
  std::vector<bool> released = impl_->partialReleases->of(key, token);
  // Releases are never dropped unsent: a late one still frees the node for others.
  const auto ballot = nodes.send<ReleaseResult>(nodes.all(), nodes.shardOf(key), std::nullopt,
                                                [k = std::string(key), t = std::string(token), cancel](IOperator& member) {
                                                  return cancel ? member.cancel(k, t) : member.unlock(k, t);
                                                });
  (void)ballot->waitForAll(Steady::now() + waited);
  const auto votes = ballot->snapshot();
  std::size_t failed = 0;
  bool earlier = false;  // some node's release counted only by its record of an earlier try
  ReleaseResult result;
  for (std::size_t i = 0; i < votes.size(); ++i) {
    const auto& vote = votes[i];
    if (vote.state != VoteState::Answered) {
      failed += released[i] ? 0 : 1;
      continue;
    }
    // Each member decides its own retried release by the server's record of it (releasedEarlier).
    if (vote.value.released && !released[i]) {
      released[i] = true;
      earlier = earlier || vote.value.releasedEarlier;
    }
    // A waiter subscribes on every node; the largest count is the best guess of how many there are.
    result.notified = std::max(result.notified, vote.value.notified);
  }
  const auto releasedCount = static_cast<std::size_t>(std::count(released.begin(), released.end(), true));
  if (releasedCount >= nodes.quorum() || releasedCount + failed < nodes.quorum()) {
    impl_->partialReleases->remember(key, token, {});
    result.released = releasedCount >= nodes.quorum();
    result.releasedEarlier = result.released && earlier;
    return result;
  }
  impl_->partialReleases->remember(key, token, releasedCount > 0 ? released : std::vector<bool>());
  nodes.throwUndecided(cancel ? "cancel" : "unlock", key,
                   "released on " + std::to_string(releasedCount) + " nodes; too few answered to tell whether a "
                   "quorum still held the lease (a retry counts the nodes already released)",
                   nodes.failuresOf(votes, waited));
}

bool RedlockOperator::extend(std::string_view key, std::string_view token, milliseconds ttl) {
  return detail::renewOnQuorum(impl_->nodes, {LeaseRef{key, token}}, ttl, false).front().extended;
}

std::vector<ExtendResult> RedlockOperator::extendAll(const std::vector<LeaseRef>& leases, milliseconds ttl) {
  if (leases.empty()) return {};
  return detail::renewOnQuorum(impl_->nodes, leases, ttl, true);
}

std::uint64_t RedlockOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  detail::RedlockNodes& nodes = impl_->nodes;
  const milliseconds waited = nodes.options().nodeTimeout;
  const Steady::time_point until = Steady::now() + waited;
  const auto ballot = nodes.send<std::uint64_t>(nodes.all(), nodes.shardOf(key), until,
                                            [k = std::string(key), atLeast](IOperator& member) {
                                              return member.raiseFence(k, atLeast);
                                            });
  (void)ballot->waitForAll(until);
  const auto votes = ballot->snapshot();
  std::size_t raised = 0;
  std::uint64_t highest = atLeast;
  for (const auto& vote : votes) {
    if (vote.state != VoteState::Answered) continue;
    ++raised;
    highest = std::max(highest, vote.value);
  }
  if (raised >= nodes.quorum()) return highest;
  nodes.throwUndecided("raiseFence", key, "only " + std::to_string(raised) + " nodes raised the fencing counter",
                   nodes.failuresOf(votes, waited));
}

std::unique_ptr<IReleaseWatch> RedlockOperator::watch(std::string_view key) {
  detail::RedlockNodes& nodes = impl_->nodes;
  const Steady::time_point start = Steady::now();
  const milliseconds nodeTimeout = detail::CallBudget::cap(nodes.options().nodeTimeout);
  const auto ballot = nodes.send<std::unique_ptr<IReleaseWatch>>(nodes.all(), nodes.watchLane(), start + 2 * nodeTimeout,
                                                             [k = std::string(key)](IOperator& member) {
                                                               return member.watch(k);
                                                             });
  // A release that matters (the holder's) deletes the key on a quorum of nodes and is published
  // on each of them, so watches on any quorum of nodes see it: two quorums share a node. So the
  // wait ends as soon as a quorum is watched, without waiting out dead nodes; subscribing being a
  // connect and a round trip, it may take up to twice the node timeout.
  (void)ballot->wait(start + 2 * nodeTimeout, [&](const auto& votes) {
    const auto watched = std::count_if(votes.begin(), votes.end(), [](const auto& vote) {
      return vote.state == VoteState::Answered && vote.value != nullptr;
    });
    return static_cast<std::size_t>(watched) >= nodes.quorum();
  });
  auto votes = ballot->take();  // a watch made later is destroyed by its task
  std::vector<std::unique_ptr<IReleaseWatch>> watches;
  for (auto& vote : votes) {
    if (vote.state == VoteState::Answered && vote.value) watches.push_back(std::move(vote.value));
  }
  if (watches.size() < nodes.size() && impl_->log->should_log(spdlog::level::debug)) {
    impl_->log->debug("dlock: redlock watches {} on {} of {} nodes", detail::quoteKey(key), watches.size(),
                  nodes.size());
  }
  if (watches.empty()) return nullptr;
  return std::make_unique<detail::RedlockWatch>(std::move(watches));
}

LeaseInfo RedlockOperator::inspect(std::string_view key) {
  detail::RedlockNodes& nodes = impl_->nodes;
  const milliseconds waited = nodes.options().nodeTimeout;
  const Steady::time_point until = Steady::now() + waited;
  const auto ballot = nodes.send<LeaseInfo>(nodes.all(), nodes.shardOf(key), until,
                                        [k = std::string(key)](IOperator& member) { return member.inspect(k); });
  (void)ballot->waitForAll(until);
  const auto votes = ballot->snapshot();
  std::size_t answered = 0;
  std::vector<milliseconds> remaining;  // of the nodes that hold the key
  LeaseInfo info;
  for (const auto& vote : votes) {
    if (vote.state != VoteState::Answered) continue;
    ++answered;
    info.fencingToken = std::max(info.fencingToken, vote.value.fencingToken);
    if (!vote.value.held) continue;
    remaining.push_back(vote.value.remaining);
    if (info.owner.empty()) {
      info.owner = vote.value.owner;
      info.ownerSince = vote.value.ownerSince;
    }
  }
  const std::size_t unanswered = nodes.size() - answered;
  if (answered >= nodes.quorum() && remaining.size() >= nodes.quorum()) {
    // Held until fewer than a quorum hold it: the quorum-th longest remaining lease.
    std::sort(remaining.begin(), remaining.end(), std::greater<>());
    info.held = true;
    info.remaining = remaining[nodes.quorum() - 1];
    return info;
  }
  if (answered >= nodes.quorum() && remaining.size() + unanswered < nodes.quorum()) {
    info.owner.clear();  // not held: no owner
    info.ownerSince = {};
    return info;
  }
  nodes.throwUndecided("inspect", key,
                   std::to_string(answered) + " nodes answered, " + std::to_string(remaining.size()) +
                       " hold the key: not enough to tell whether a quorum holds it",
                   nodes.failuresOf(votes, waited));
}

std::string RedlockOperator::describe() const { return impl_->nodes.description(); }

std::size_t RedlockOperator::nodes() const noexcept { return impl_->nodes.size(); }

std::size_t RedlockOperator::quorum() const noexcept { return impl_->nodes.quorum(); }

const RedlockOptions& RedlockOperator::options() const noexcept { return impl_->nodes.options(); }

}  // namespace dlock
