// SPDX-License-Identifier: Apache-2.0
// RedlockOperator.h — the Redlock algorithm over N independent backends (N = 5 recommended):
// every call goes to all of them in parallel on the operator's own worker threads, and counts when
// a quorum (N/2 + 1) agrees within the node timeout and the validity (ttl - elapsed - drift) is
// still positive. Fencing tokens stay monotonic across quorums (each member must be an
// IFenceRaiser). What each call decides, its errors, and what Redlock does and does not protect
// against: backends/redlock/README.md.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IOperator.h"

namespace dlock {

struct RedlockOptions {
  // How long a call waits for each node's answer. It must be much smaller than the lease (the
  // Redlock description suggests 5-50 ms for a 10 s lease) so that a down node costs an
  // acquisition little of its validity. Give the members a command timeout no larger than this
  // (dlock::connect does); a member call that outlives it still occupies one worker thread.
  std::chrono::milliseconds nodeTimeout{std::chrono::milliseconds(100)};
  // Clock drift allowance subtracted from every validity time: ttl * factor + margin.
  double clockDriftFactor = 0.01;
  std::chrono::milliseconds clockDriftMargin{std::chrono::milliseconds(2)};
  // Request threads per node (each node also has one thread for release subscriptions).
  // Requests for one key always go to the same thread of a node, so a node sees them in the
  // order they were made (a release never overtakes its acquire).
  std::size_t threadsPerNode = 2;
};

class RedlockOperator final : public IOperator, public IFenceRaiser, public ILeaseInspector {
 public:
  // At least 3 members, none null, no operator twice (an odd count is the sensible choice: an
  // even one tolerates no more failures than the odd count below it). ConfigError otherwise, or
  // when an option is out of range. Starts nodes * (threadsPerNode + 1) worker threads.
  RedlockOperator(std::vector<std::shared_ptr<IOperator>> members, RedlockOptions options = {});
  // Stops the workers. Releases still queued for unreachable nodes are dropped; those leases end
  // at their TTL.
  ~RedlockOperator() override;

  // One attempt (retrying is the lock's wait strategy's job). When not acquired, holderTtl is the
  // time until a quorum of nodes would be free of the current holders (0 when unknown).
  // ConnectionError when fewer than a quorum of nodes answered; nothing of ours stays on the
  // nodes that did answer.
  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  // Released when a quorum released the key; not released when fewer than a quorum still held it
  // for this token. ConnectionError when the unanswered nodes could tip it either way (a retry
  // then finds the reachable nodes already released and reports not released).
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  ReleaseResult cancel(std::string_view key, std::string_view token) override;
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  // Raises the counter on every node; returns the highest value once a quorum has it.
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override;
  // Returns once a quorum of nodes is subscribed (a release deletes the key on a quorum and is
  // published on each of those nodes, and two quorums share a node), or after 2 * nodeTimeout
  // with what it has; nullptr when no node could subscribe.
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override;
  // held: a quorum holds the key; remaining: until fewer than a quorum hold it; fencingToken:
  // the highest counter among the nodes that answered. ConnectionError when fewer than a quorum
  // answered or the unanswered nodes could change `held`.
  LeaseInfo inspect(std::string_view key) override;
  // "redlock://" followed by the members' descriptions, separated by ';'.
  [[nodiscard]] std::string describe() const override;

  [[nodiscard]] std::size_t nodes() const noexcept;
  [[nodiscard]] std::size_t quorum() const noexcept;
  [[nodiscard]] const RedlockOptions& options() const noexcept;

  class Impl;

 private:
  ReleaseResult release(std::string_view key, std::string_view token, bool cancel);

  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock
