// SPDX-License-Identifier: Apache-2.0
// RedlockNodes.h — a Redlock's N members and how one request reaches them: fanned out to every
// node on its worker threads (send), the answers gathered on a Ballot, waited for until a quorum
// decides (waitDecided), and an undecided outcome told as the error it is (throwUndecided).
// Also the validity arithmetic every quorum call shares (drift allowance, stragglers' time).
// Owner: one RedlockOperator. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "Ballot.h"
#include "NodeWorkers.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"
#include "dlock/redlock/RedlockOperator.h"

namespace dlock::detail {

// Why the nodes that did not give a usable answer failed, for an error message.
struct Failures {
  std::size_t count = 0;
  bool allBackend = true;  // every failure was an error reply
  std::string text;

  void add(const Failures& more);
};

class RedlockNodes {
 public:
  using Steady = std::chrono::steady_clock;

  RedlockNodes(std::vector<std::shared_ptr<IOperator>> members, RedlockOptions options);

  [[nodiscard]] std::size_t size() const noexcept { return members_.size(); }
  [[nodiscard]] std::size_t quorum() const noexcept { return quorum_; }
  [[nodiscard]] const std::vector<std::size_t>& all() const noexcept { return all_; }
  [[nodiscard]] const RedlockOptions& options() const noexcept { return options_; }
  [[nodiscard]] const std::string& description() const noexcept { return description_; }

  // Each key goes to one worker thread per node, so requests for it reach the node in order.
  [[nodiscard]] std::size_t shardOf(std::string_view key) const;
  // The lane of release subscriptions: its own thread per node, because subscribing to a dead
  // node can block for the member's whole connect timeout, which must not delay requests.
  [[nodiscard]] std::size_t watchLane() const noexcept { return options_.threadsPerNode; }

  // The lease left after the drift allowance (ttl * factor, rounded up, + margin);
  // InvalidArgumentError when nothing is left.
  [[nodiscard]] std::chrono::milliseconds validityOf(std::chrono::milliseconds ttl, const char* operation,
                                                     std::string_view key) const;

  // Posts `call(member)` to each of `nodes`; a task still queued at `sendBy` is dropped unsent.
  // `call` owns its arguments: the tasks may outlive the caller's wait.
  template <class T, class Call>
  std::shared_ptr<Ballot<T>> send(const std::vector<std::size_t>& nodes, std::size_t shard,
                                  std::optional<Steady::time_point> sendBy, Call call);

  // Waits for `ballot` until `decided(votes)` or `deadline`, then for the nodes still pending
  // until the stragglers' time (at most `deadline`). True when the first wait ran into `deadline`.
  template <class T, class Decided>
  bool waitDecided(Ballot<T>& ballot, Steady::time_point start, std::chrono::milliseconds validFor,
                   Steady::time_point deadline, Decided decided) const {
    if (ballot.wait(deadline, decided)) return true;
    (void)ballot.waitForAll(std::min(deadline, stragglersBy(start, validFor)));
    return false;
  }

  // Why the nodes that did not answer usably failed; a pending node "no answer within `waited`".
  template <class T>
  Failures failuresOf(const std::vector<Vote<T>>& votes, std::chrono::milliseconds waited) const;

  // The outcome could not be decided: BackendError when every failing node answered with an
  // error reply, ConnectionError otherwise.
  [[noreturn]] void throwUndecided(const std::string& operation, std::string_view key, const std::string& problem,
                                   const Failures& failures) const;

 private:
  // Once the outcome is known, the nodes that have not answered get until the node timeout to
  // take the request too, but never past half the validity: the caller needs the rest for its
  // work, and a node slower than the validity would otherwise cost the whole lease.
  [[nodiscard]] Steady::time_point stragglersBy(Steady::time_point start, std::chrono::milliseconds validFor) const {
    return start + std::min(options_.nodeTimeout, validFor / 2);
  }

  const std::vector<std::shared_ptr<IOperator>> members_;
  const RedlockOptions options_;
  const std::size_t quorum_;
  const std::vector<std::size_t> all_;
  const std::string description_;
  // Last: destroyed (joined) first, while everything its tasks might touch still exists.
  NodeWorkers workers_;
};

template <class T, class Call>
std::shared_ptr<Ballot<T>> RedlockNodes::send(const std::vector<std::size_t>& nodes, std::size_t shard,
                                              std::optional<Steady::time_point> sendBy, Call call) {
  auto ballot = std::make_shared<Ballot<T>>(members_.size());
  const auto shared = std::make_shared<const Call>(std::move(call));  // one copy of its arguments for all nodes
  for (std::size_t node : nodes) ballot->ask(node);
  for (std::size_t node : nodes) {
    workers_.post(node, shard, [ballot, node, sendBy, shared, member = members_[node]]() {
      if (sendBy && Steady::now() >= *sendBy) {
        ballot->fail(node, member->describe() + ": not sent, the node was still busy with earlier requests", false,
                     true);
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

template <class T>
Failures RedlockNodes::failuresOf(const std::vector<Vote<T>>& votes, std::chrono::milliseconds waited) const {
  Failures failures;
  for (std::size_t i = 0; i < votes.size(); ++i) {
    const Vote<T>& vote = votes[i];
    std::string reason;
    if (vote.state == VoteState::Failed) {
      reason = vote.error;
      failures.allBackend = failures.allBackend && vote.backendError;
    } else if (vote.state == VoteState::Pending) {
      reason = members_[i]->describe() + ": no answer within " + std::to_string(waited.count()) + " ms";
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

}  // namespace dlock::detail
