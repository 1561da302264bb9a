// SPDX-License-Identifier: Apache-2.0
#include "dlock/redlock/RedlockOperator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include "Ballot.h"
#include "NodeWorkers.h"
#include "RedlockMemory.h"
#include "RedlockWatch.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;
using detail::Ballot;
using detail::Vote;
using detail::VoteState;

constexpr std::size_t kMaxThreadsPerNode = 64;

long long millisOf(Steady::duration duration) {
  return std::chrono::duration_cast<milliseconds>(duration).count();
}

// Why the nodes that did not give a usable answer failed, for an error message.
struct Failures {
  std::size_t count = 0;
  bool allBackend = true;  // every failure was an error reply
  std::string text;
};

template <class T>
Failures failuresOf(const std::vector<Vote<T>>& votes, const std::vector<std::shared_ptr<IOperator>>& members,
                    milliseconds waited) {
  Failures failures;
  for (std::size_t i = 0; i < votes.size(); ++i) {
    const Vote<T>& vote = votes[i];
    std::string reason;
    if (vote.state == VoteState::Failed) {
      reason = vote.error;
      failures.allBackend = failures.allBackend && vote.backendError;
    } else if (vote.state == VoteState::Pending) {
      reason = members[i]->describe() + ": no answer within " + std::to_string(waited.count()) + " ms";
      failures.allBackend = false;
    } else {
      continue;
    }
    ++failures.count;
    if (!failures.text.empty()) failures.text += "; ";
    failures.text += reason;
  }
  return failures;
}

}  // namespace

class RedlockOperator::Impl {
 public:
  Impl(std::vector<std::shared_ptr<IOperator>> members, RedlockOptions options)
      : members_(std::move(members)),
        options_(options),
        quorum_(members_.size() / 2 + 1),
        all_(allNodes(members_.size())),
        description_(describeMembers(members_)),
        log_(detail::logger()),
        memory_([nodes = members_.size()] { return std::make_shared<detail::RedlockMemory>(nodes); }),
        workers_(members_.size(), options_.threadsPerNode + 1) {}

  // The lane of release subscriptions: its own thread per node, because subscribing to a dead
  // node can block for the member's whole connect timeout, which must not delay requests.
  std::size_t watchLane() const { return options_.threadsPerNode; }

  // Each key goes to one worker thread per node, so requests for it reach the node in order.
  std::size_t shardOf(std::string_view key) const {
    return std::hash<std::string_view>{}(key) % options_.threadsPerNode;
  }

  // The clock drift allowance for a lease: ttl * factor (rounded up) + margin.
  milliseconds driftFor(milliseconds ttl) const {
    const double scaled = std::ceil(static_cast<double>(ttl.count()) * options_.clockDriftFactor);
    return milliseconds(static_cast<milliseconds::rep>(scaled)) + options_.clockDriftMargin;
  }

  // The lease left after the drift allowance; InvalidArgumentError when nothing is left.
  milliseconds validityOf(milliseconds ttl, const char* operation, std::string_view key) const {
    const milliseconds drift = driftFor(ttl);
    if (ttl <= drift) {
      throw InvalidArgumentError("dlock: " + std::string(operation) + " " + detail::quoteKey(key) + " on " +
                                 description_ + ": a lease of " + std::to_string(ttl.count()) +
                                 " ms is not longer than the clock drift allowance of " +
                                 std::to_string(drift.count()) + " ms");
    }
    return ttl - drift;
  }

  // Once the outcome is known, the nodes that have not answered get until the node timeout to
  // take the request too, but never past half the validity: the caller needs the rest for its
  // work, and a node slower than the validity would otherwise cost the whole lease.
  Steady::time_point stragglersBy(Steady::time_point start, milliseconds validFor) const {
    return start + std::min(options_.nodeTimeout, validFor / 2);
  }

  // Waits for `ballot` until `decided(votes)` or `deadline`, then for the nodes still pending
  // until stragglersBy (at most `deadline`). True when the first wait ran into `deadline`.
  template <class T, class Decided>
  bool waitDecided(Ballot<T>& ballot, Steady::time_point start, milliseconds validFor, Steady::time_point deadline,
                   Decided decided) const {
    if (ballot.wait(deadline, decided)) return true;
    (void)ballot.waitForAll(std::min(deadline, stragglersBy(start, validFor)));
    return false;
  }

  // Posts `call(member)` to each of `nodes`; a task still queued at `sendBy` is dropped unsent.
  // `call` owns its arguments: the tasks may outlive the caller's wait.
  template <class T, class Call>
  std::shared_ptr<Ballot<T>> send(const std::vector<std::size_t>& nodes, std::size_t shard,
                                  std::optional<Steady::time_point> sendBy, Call call) {
    auto ballot = std::make_shared<Ballot<T>>(members_.size());
    const auto shared = std::make_shared<const Call>(std::move(call));  // one copy of its arguments for all nodes
    for (std::size_t node : nodes) ballot->ask(node);
    for (std::size_t node : nodes) {
      workers_.post(node, shard, [ballot, node, sendBy, shared, member = members_[node]]() {
        if (sendBy && Steady::now() >= *sendBy) {
          ballot->fail(node, member->describe() + ": not sent, the node was still busy with earlier requests",
                       false, true);
          return;
        }
        try {
          ballot->answer(node, (*shared)(*member));
        } catch (const BackendError& error) {
          ballot->fail(node, error.what(), true);
        } catch (const std::exception& error) {
          ballot->fail(node, error.what(), false);
        } catch (...) {
          ballot->fail(node, member->describe() + ": unknown error", false);
        }
      });
    }
    return ballot;
  }

  // The outcome could not be decided: BackendError when every failing node answered with an
  // error reply, ConnectionError otherwise.
  [[noreturn]] void throwUndecided(const std::string& operation, std::string_view key, const std::string& problem,
                                   const Failures& failures) const {
    std::string message = "dlock: " + operation + " " + detail::quoteKey(key) + " on " + description_ + " (" +
                          std::to_string(members_.size()) + " nodes, quorum " + std::to_string(quorum_) +
                          "): " + problem;
    if (!failures.text.empty()) message += ": " + failures.text;
    if (failures.count > 0 && failures.allBackend) throw BackendError(message);
    throw ConnectionError(message);
  }

  struct Rollback {
    std::vector<Vote<AcquireResult>> acquires;  // the attempt's votes, late answers included
    std::vector<Vote<ReleaseResult>> releases;
  };

  // Releases (key, token) on every node after a failed attempt, and waits (at most nodeTimeout)
  // for the nodes whose acquire took the key or had not answered when the attempt was decided.
  // A release reaches each node after that node's acquire (same worker thread), so once it has
  // answered, the acquire's outcome is known too. Nodes where our key may survive are remembered
  // as suspects until the lease would have ended.
  Rollback rollback(std::string_view key, std::string_view token, const Ballot<AcquireResult>& acquires,
                    const std::vector<Vote<AcquireResult>>& decidedOn, Steady::time_point start, milliseconds ttl,
                    std::size_t shard) {
    auto releases = send<ReleaseResult>(all_, shard, std::nullopt,
                                        [k = std::string(key), t = std::string(token)](IOperator& member) {
                                          return member.unlock(k, t);
                                        });
    (void)releases->wait(Steady::now() + options_.nodeTimeout, [&](const auto& votes) {
      for (std::size_t i = 0; i < votes.size(); ++i) {
        const Vote<AcquireResult>& vote = decidedOn[i];
        const bool mayHoldIt =
            vote.state == VoteState::Pending || (vote.state == VoteState::Answered && vote.value.acquired);
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
    if (!lingering.empty()) memory_->addSuspects(key, token, lingering, start + ttl);
    return result;
  }

  // When the key is expected to be free on a quorum, after a failed attempt and its rollback:
  // nodes the rollback released (or that our acquire had and the release reached) are free, a
  // holder's node after its TTL; other nodes are unknown. 0 when unknown; at least 1 ms.
  milliseconds quorumFreeIn(const Rollback& rollback) const {
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
    if (known.size() < quorum_) return milliseconds(0);
    std::nth_element(known.begin(), known.begin() + static_cast<std::ptrdiff_t>(quorum_ - 1), known.end());
    return std::max(known[quorum_ - 1], milliseconds(1));
  }

  // A node's vote on one lease's renewal.
  static constexpr signed char kYes = 1, kNo = 0, kCannotTell = -1;

  // extend() and extendAll(): one call per node (`batch` uses the members' extendAll). A lease
  // extended on a quorum in time is valid for ttl - drift from `start`, as an acquisition is.
  std::vector<ExtendResult> extendQuorum(const std::vector<LeaseRef>& leases, milliseconds ttl, bool batch) {
    const char* operation = batch ? "extendAll" : "extend";
    const milliseconds validFor = validityOf(ttl, operation, leases.front().key);
    auto owned = std::make_shared<std::vector<std::pair<std::string, std::string>>>();
    owned->reserve(leases.size());
    for (const auto& lease : leases) owned->emplace_back(std::string(lease.key), std::string(lease.token));

    const Steady::time_point start = Steady::now();
    const milliseconds waited = std::min(options_.nodeTimeout, validFor);
    // Per lease and node: 1 extended, 0 not ours there, -1 the node could not tell.
    using Flags = std::vector<signed char>;
    const auto ballot =
        send<Flags>(all_, shardOf(leases.front().key), start + waited,
                                [owned, ttl, batch](IOperator& member) -> Flags {
                                  if (!batch) {
                                    return {member.extend(owned->front().first, owned->front().second, ttl) ? kYes : kNo};
                                  }
                                  std::vector<LeaseRef> refs;
                                  refs.reserve(owned->size());
                                  for (const auto& [key, token] : *owned) refs.push_back(LeaseRef{key, token});
                                  const std::vector<ExtendResult> results = member.extendAll(refs, ttl);
                                  if (results.size() != refs.size()) {
                                    throw BackendError("dlock: extendAll on " + member.describe() + " returned " +
                                                       std::to_string(results.size()) + " results for " +
                                                       std::to_string(refs.size()) + " leases");
                                  }
                                  Flags extended;
                                  extended.reserve(results.size());
                                  for (const auto& result : results) {
                                    extended.push_back(result.extended ? kYes : result.unknown ? kCannotTell : kNo);
                                  }
                                  return extended;
                                });
    // Decided when every lease has a quorum of yes, or too few nodes left to give it one.
    const std::size_t nodes = members_.size();
    (void)waitDecided(*ballot, start, validFor, start + waited, [&](const std::vector<Vote<Flags>>& votes) {
      for (std::size_t j = 0; j < leases.size(); ++j) {
        std::size_t yes = 0;
        std::size_t no = 0;
        for (const auto& vote : votes) {
          if (vote.state == VoteState::Answered) {
            yes += vote.value[j] == 1 ? 1 : 0;
            no += vote.value[j] == 1 ? 0 : 1;  // a node's "cannot tell" is final for this round
          } else if (vote.state == VoteState::Failed) {
            ++no;
          }
        }
        if (yes < quorum_ && no <= nodes - quorum_) return false;
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
        yes += answered && vote.value[j] == 1 ? 1 : 0;
        cannotTell += !answered || vote.value[j] < 0 ? 1 : 0;
      }
      if (!valid) continue;  // the extension may already have run out somewhere: lost
      if (yes >= quorum_) {
        result[j] = ExtendResult{true, false, validFor};
      } else if (yes + cannotTell >= quorum_) {
        result[j].unknown = true;
        if (!undecided) undecided = j;
      }
    }
    if (undecided && !batch) {
      throwUndecided(operation, leases[*undecided].key,
                     "too few nodes answered to tell whether a quorum still holds the lease",
                     failuresOf(votes, members_, waited));
    }
    return result;
  }

  const std::vector<std::shared_ptr<IOperator>> members_;
  const RedlockOptions options_;
  const std::size_t quorum_;
  const std::vector<std::size_t> all_;
  const std::string description_;
  const detail::Log log_;
  // Per process: a forked child starts with none (a parent's thread may have held its mutex).
  detail::ForkLocal<detail::RedlockMemory> memory_;

 private:
  static std::vector<std::size_t> allNodes(std::size_t count) {
    std::vector<std::size_t> nodes(count);
    for (std::size_t i = 0; i < count; ++i) nodes[i] = i;
    return nodes;
  }

  static std::string describeMembers(const std::vector<std::shared_ptr<IOperator>>& members) {
    std::string text = "redlock://";
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (i > 0) text += ";";
      text += members[i]->describe();
    }
    return text;
  }




 public:
  // Last: destroyed (joined) first, while everything its tasks might touch still exists.
  detail::NodeWorkers workers_;
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

// Fencing. Each node keeps its own counter, and those are not comparable with one another. An
// acquisition takes the highest token F among the nodes of its quorum and raises the counter of
// every node of the quorum that is below F to F before it returns, so when it returns a quorum
// has counters >= F (a node whose raise fails does not count; without a quorum the attempt is
// undone). A later acquisition's quorum overlaps that quorum in at least one node (two sets of
// N/2 + 1 out of N always share a node); its acquire there increments that node's counter past
// F, and since it takes the maximum over its own quorum, its token is > F. Counters never go
// down (INCR and raiseFence only raise them) as long as the nodes keep their data: a node that
// restarts without persistence forgets its counters (see the README).
AcquireResult RedlockOperator::lock(std::string_view key, std::string_view token, milliseconds ttl) {
  Impl& d = *impl_;
  const std::size_t nodes = d.members_.size();
  const std::size_t quorum = d.quorum_;
  const milliseconds validFor = d.validityOf(ttl, "lock", key);
  const Steady::time_point start = Steady::now();
  // Waiting past the validity is pointless: then the attempt has failed on time, not on the nodes.
  const bool cutByValidity = validFor <= d.options_.nodeTimeout;
  const milliseconds waited = std::min(d.options_.nodeTimeout, validFor);
  const std::vector<bool> suspect = d.memory_->suspectsOf(key, token, start);
  const std::size_t shard = d.shardOf(key);
  const std::string ownedKey(key);

  const auto counts = [&](const Vote<AcquireResult>& vote, std::size_t i) {
    return vote.state == VoteState::Answered && vote.value.acquired && !suspect[i];
  };
  const auto acquires = d.send<AcquireResult>(d.all_, shard, start + waited,
                                              [k = ownedKey, t = std::string(token), ttl](IOperator& member) {
                                                return member.lock(k, t, ttl);
                                              });
  // Decided by a quorum of yes or a certain failure; after a yes the other nodes still get their
  // chance (stragglersBy), so the key and the fencing token end up on as many nodes as possible.
  const bool timedOut =
      d.waitDecided(*acquires, start, validFor, start + waited, [&](const std::vector<Vote<AcquireResult>>& votes) {
        std::size_t yes = 0;
        std::size_t no = 0;
        for (std::size_t i = 0; i < votes.size(); ++i) {
          if (counts(votes[i], i)) {
            ++yes;
          } else if (votes[i].state != VoteState::Pending) {
            ++no;
          }
        }
        return yes >= quorum || no > nodes - quorum;
      });
  const std::vector<Vote<AcquireResult>> votes = acquires->snapshot();
  // Nodes still pending at the deadline failed, unless the deadline was the validity's.
  const bool pendingFailed = timedOut && !cutByValidity;

  std::vector<std::size_t> taken;  // nodes that count toward the quorum
  std::size_t failed = 0;          // nodes that could not answer
  for (std::size_t i = 0; i < nodes; ++i) {
    if (counts(votes[i], i)) taken.push_back(i);
    if (votes[i].state == VoteState::Failed || (votes[i].state == VoteState::Pending && pendingFailed)) ++failed;
  }

  const char* why = "the key is held elsewhere";
  std::optional<Failures> raiseFailures;
  if (taken.size() >= quorum) {
    std::uint64_t fence = 0;
    for (std::size_t i : taken) fence = std::max(fence, votes[i].value.fencingToken);
    std::vector<std::size_t> lagging;
    for (std::size_t i : taken) {
      if (votes[i].value.fencingToken < fence) lagging.push_back(i);
    }
    std::size_t fenced = taken.size() - lagging.size();
    if (!lagging.empty()) {
      const Steady::time_point now = Steady::now();
      const bool raiseCutByValidity = start + validFor <= now + d.options_.nodeTimeout;
      const Steady::time_point raiseBy = raiseCutByValidity ? start + validFor : now + d.options_.nodeTimeout;
      if (now < raiseBy) {
        const auto raises = d.send<std::uint64_t>(lagging, shard, raiseBy, [k = ownedKey, fence](IOperator& member) {
          return member.raiseFence(k, fence);
        });
        const bool raiseTimedOut = raises->waitForAll(raiseBy);
        const auto raised = raises->snapshot();
        for (std::size_t i : lagging) {
          const Vote<std::uint64_t>& vote = raised[i];
          if (vote.state == VoteState::Answered && vote.value >= fence) {
            ++fenced;
          } else if (vote.state == VoteState::Failed ||
                     (vote.state == VoteState::Pending && raiseTimedOut && !raiseCutByValidity)) {
            ++failed;
          }
        }
        if (fenced < quorum) raiseFailures = failuresOf(raised, d.members_, d.options_.nodeTimeout);
      }
    }
    const Steady::duration elapsed = Steady::now() - start;
    if (fenced >= quorum && elapsed < validFor) {
      if (std::find(suspect.begin(), suspect.end(), true) != suspect.end()) d.memory_->forgetSuspects(key, token);
      if (d.log_->should_log(spdlog::level::debug)) {
        d.log_->debug("dlock: redlock acquired {} on {} of {} nodes (fencing token {}, {} ms of {} ms used)",
                      detail::quoteKey(key), taken.size(), nodes, fence, millisOf(elapsed), ttl.count());
      }
      AcquireResult result;
      result.acquired = true;
      result.fencingToken = fence;
      result.validity = validFor;  // from `start`: the nodes' leases began no earlier
      return result;
    }
    why = elapsed >= validFor ? "the validity time ran out" : "the fencing token could not be carried to a quorum";
  } else if (timedOut && cutByValidity) {
    why = "the validity time ran out";
  }

  // Not acquired: release on every node, so no partial hold blocks the others.
  const Impl::Rollback undone = d.rollback(key, token, *acquires, votes, start, ttl, shard);
  if (failed > nodes - quorum) {
    Failures failures = failuresOf(votes, d.members_, waited);
    if (raiseFailures) {
      failures.count += raiseFailures->count;
      failures.allBackend = failures.allBackend && raiseFailures->allBackend;
      failures.text += (failures.text.empty() ? "" : "; ") + raiseFailures->text;
    }
    d.throwUndecided("lock", key,
                     std::to_string(failed) + " nodes could not answer, so no quorum of " + std::to_string(quorum) +
                         " was possible",
                     failures);
  }
  AcquireResult result;
  result.holderTtl = d.quorumFreeIn(undone);
  if (d.log_->should_log(spdlog::level::debug)) {
    d.log_->debug("dlock: redlock did not acquire {} ({} of {} nodes, quorum {}): {}; free in {} ms",
                  detail::quoteKey(key), taken.size(), nodes, quorum, why, result.holderTtl.count());
  }
  return result;
}

ReleaseResult RedlockOperator::unlock(std::string_view key, std::string_view token) {
  Impl& d = *impl_;
  const milliseconds waited = d.options_.nodeTimeout;
  std::vector<bool> released = d.memory_->releasedBefore(key, token);
  // Releases are never dropped unsent: a late one still frees the node for others.
  const auto ballot = d.send<ReleaseResult>(d.all_, d.shardOf(key), std::nullopt,
                                            [k = std::string(key), t = std::string(token)](IOperator& member) {
                                              return member.unlock(k, t);
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
  if (releasedCount >= d.quorum_ || releasedCount + failed < d.quorum_) {
    d.memory_->rememberReleased(key, token, {});
    result.released = releasedCount >= d.quorum_;
    result.releasedEarlier = result.released && earlier;
    return result;
  }
  d.memory_->rememberReleased(key, token, releasedCount > 0 ? released : std::vector<bool>());
  d.throwUndecided("unlock", key,
                   "released on " + std::to_string(releasedCount) + " nodes; too few answered to tell whether a "
                   "quorum still held the lease (a retry counts the nodes already released)",
                   failuresOf(votes, d.members_, waited));
}

bool RedlockOperator::extend(std::string_view key, std::string_view token, milliseconds ttl) {
  return impl_->extendQuorum({LeaseRef{key, token}}, ttl, false).front().extended;
}

std::vector<ExtendResult> RedlockOperator::extendAll(const std::vector<LeaseRef>& leases, milliseconds ttl) {
  if (leases.empty()) return {};
  return impl_->extendQuorum(leases, ttl, true);
}

std::uint64_t RedlockOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  Impl& d = *impl_;
  const milliseconds waited = d.options_.nodeTimeout;
  const Steady::time_point until = Steady::now() + waited;
  const auto ballot = d.send<std::uint64_t>(d.all_, d.shardOf(key), until,
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
  if (raised >= d.quorum_) return highest;
  d.throwUndecided("raiseFence", key, "only " + std::to_string(raised) + " nodes raised the fencing counter",
                   failuresOf(votes, d.members_, waited));
}

std::unique_ptr<IReleaseWatch> RedlockOperator::watch(std::string_view key) {
  Impl& d = *impl_;
  const Steady::time_point start = Steady::now();
  const auto ballot = d.send<std::unique_ptr<IReleaseWatch>>(d.all_, d.watchLane(), start + 2 * d.options_.nodeTimeout,
                                                             [k = std::string(key)](IOperator& member) {
                                                               return member.watch(k);
                                                             });
  // A release that matters (the holder's) deletes the key on a quorum of nodes and is published
  // on each of them, so watches on any quorum of nodes see it: two quorums share a node. So the
  // wait ends as soon as a quorum is watched, without waiting out dead nodes; subscribing being a
  // connect and a round trip, it may take up to twice the node timeout.
  (void)ballot->wait(start + 2 * d.options_.nodeTimeout, [&](const auto& votes) {
    const auto watched = std::count_if(votes.begin(), votes.end(), [](const auto& vote) {
      return vote.state == VoteState::Answered && vote.value != nullptr;
    });
    return static_cast<std::size_t>(watched) >= d.quorum_;
  });
  auto votes = ballot->take();  // a watch made later is destroyed by its task
  std::vector<std::unique_ptr<IReleaseWatch>> watches;
  for (auto& vote : votes) {
    if (vote.state == VoteState::Answered && vote.value) watches.push_back(std::move(vote.value));
  }
  if (watches.size() < d.members_.size() && d.log_->should_log(spdlog::level::debug)) {
    d.log_->debug("dlock: redlock watches {} on {} of {} nodes", detail::quoteKey(key), watches.size(),
                  d.members_.size());
  }
  if (watches.empty()) return nullptr;
  return std::make_unique<detail::RedlockWatch>(std::move(watches));
}

LeaseInfo RedlockOperator::inspect(std::string_view key) {
  Impl& d = *impl_;
  const milliseconds waited = d.options_.nodeTimeout;
  const Steady::time_point until = Steady::now() + waited;
  const auto ballot = d.send<LeaseInfo>(d.all_, d.shardOf(key), until,
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
    if (vote.value.held) remaining.push_back(vote.value.remaining);
  }
  const std::size_t unanswered = d.members_.size() - answered;
  if (answered >= d.quorum_ && remaining.size() >= d.quorum_) {
    // Held until fewer than a quorum hold it: the quorum-th longest remaining lease.
    std::sort(remaining.begin(), remaining.end(), std::greater<>());
    info.held = true;
    info.remaining = remaining[d.quorum_ - 1];
    return info;
  }
  if (answered >= d.quorum_ && remaining.size() + unanswered < d.quorum_) return info;
  d.throwUndecided("inspect", key,
                   std::to_string(answered) + " nodes answered, " + std::to_string(remaining.size()) +
                       " hold the key: not enough to tell whether a quorum holds it",
                   failuresOf(votes, d.members_, waited));
}

std::string RedlockOperator::describe() const { return impl_->description_; }

std::size_t RedlockOperator::nodes() const noexcept { return impl_->members_.size(); }

std::size_t RedlockOperator::quorum() const noexcept { return impl_->quorum_; }

const RedlockOptions& RedlockOperator::options() const noexcept { return impl_->options_; }

}  // namespace dlock
