// SPDX-License-Identifier: Apache-2.0
// RedisOperator.h — the IOperator of every Redis topology, written once: SingleOperator,
// SentinelOperator and ClusterOperator are this class over one server, a Sentinel-watched master
// and a Cluster. Made through those classes or dlock::connect(uri).
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/IConditionOperator.h"
#include "dlock/IElectionOperator.h"
#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/IRenewalBatch.h"
#include "dlock/ISemaphoreOperator.h"

namespace dlock {
namespace detail {
class Topology;
struct RedisOperatorOptions;
}  // namespace detail

class RedisOperator : public IOperator,
                      public IFenceRaiser,
                      public ILeaseInspector,
                      public IOwnerRecorder,
                      public IFairOperator,
                      public IReadWriteOperator,
                      public ISemaphoreOperator,
                      public IConditionOperator,
                      public IElectionOperator,
                      public IRenewalBatch {
 public:
  ~RedisOperator() override;

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  AcquireResult lockRecordingOwner(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                                   std::string_view label) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  // Leaves a tombstone when the key is not ours: the token's acquire, if still on its way, is refused.
  ReleaseResult cancel(std::string_view key, std::string_view token) override;
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  // A watchdog round of every kind: one pipeline per node, each hold by its own kind's script
  // (RedisRenewalBatch.cpp).
  std::vector<ExtendResult> renewBatch(const std::vector<Renewal>& renewals) override;
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override;
  LeaseInfo inspect(std::string_view key) override;
  [[nodiscard]] std::string describe() const override;

  // The fair lock's queue (RedisFairOperator.cpp, FairScripts.h).
  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override;
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override;
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override;
  // With wait_replicas, every primitive's acquires and renewals wait for the replicas
  // (ReplicaWait.h); a hand-off counts once its grantee's confirming extend is acknowledged.
  // Conditions (RedisConditionOperator.cpp, ConditionScripts.h): wait_replicas refused.
  [[nodiscard]] std::string conditionUnsupported() const override;

  // Elections' leader records (RedisElectionOperator.cpp, ElectionScripts.h).
  bool proclaim(std::string_view key, std::string_view token, std::uint64_t term, std::string_view value) override;
  LeaderRecord readLeader(std::string_view key) override;
  void announce(std::string_view key) override;
  std::unique_ptr<ILeaderWatch> watchLeader(std::string_view key) override;

  // Checks the backend now (RedisProbe.cpp): its discovery, a connection, AUTH, SELECT and a PING.
  // dlock::connect() calls it unless told to connect lazily. BackendError when the server refuses
  // (a wrong password, a missing database), ConnectionError when it cannot be reached; each
  // message names the fix.
  void probe();

  // Connections re-opened after a failure, since construction.
  [[nodiscard]] std::uint64_t reconnects() const noexcept;

 protected:
  using MakeTopology = std::function<std::shared_ptr<detail::Topology>()>;
  // Makes this process's topology at once, so its configuration errors reach the caller; a forked
  // child makes its own at its first call.
  RedisOperator(const detail::RedisOperatorOptions& options, MakeTopology makeTopology);
  // This process's topology.
  [[nodiscard]] detail::Topology& topology() const;
  [[nodiscard]] const std::shared_ptr<detail::Topology>& sharedTopology() const;
  [[nodiscard]] const detail::RedisOperatorOptions& operatorOptions() const;

 private:
  ReleaseResult release(std::string_view key, std::string_view token, bool cancel);
  // lock(), recording `label` when given.
  AcquireResult acquire(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                        const std::string_view* label);

  // The read-write locks (RedisReadWriteOperator.cpp, ReadWriteScripts.h).
  FairAcquireResult doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                              std::chrono::milliseconds ttl, std::chrono::milliseconds waiterLease) override;
  ReleaseResult doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) override;
  bool doDowngrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) override;
  FairAcquireResult doTryUpgrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) override;
  bool doExtend(const ReadWriteLease& lease, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> doExtendAll(const std::vector<ReadWriteLease>& leases,
                                        std::chrono::milliseconds ttl) override;
  bool doLeave(std::string_view name, std::string_view token, ReadWriteMode mode, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> doWatch(std::string_view name, std::string_view token) override;
  ReadWriteInfo doInspect(std::string_view name) override;
  // The semaphore's calls (RedisSemaphoreOperator.cpp); the watchdog's batch is one call per slot.
  SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                          std::uint32_t capacity, std::chrono::milliseconds lease,
                                          std::chrono::milliseconds waiterLease) override;
  ReleaseResult doReleasePermits(std::string_view name, std::string_view token) override;
  bool doExtendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) override;
  std::vector<ExtendResult> doExtendPermitsAll(const std::vector<LeaseRef>& leases,
                                               std::chrono::milliseconds lease) override;
  bool doLeavePermitQueue(std::string_view name, std::string_view token) override;
  std::unique_ptr<IGrantWatch> doWatchPermitGrants(std::string_view name, std::string_view token) override;
  std::uint32_t doResizeSemaphore(std::string_view name, std::uint32_t capacity) override;
  SemaphoreInfo doInspectSemaphore(std::string_view name) override;
  // The conditions' calls (RedisConditionOperator.cpp).
  AwaitResult doAwait(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                      std::uint64_t fencingToken, std::chrono::milliseconds ttl,
                      std::chrono::milliseconds waiterLease) override;
  SignalResult doSignal(std::string_view key, std::string_view name, std::string_view token, ConditionLock lock,
                        bool all) override;
  std::vector<ExtendResult> doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                            std::chrono::milliseconds waiterLease) override;
  bool doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                        std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> doWatchSignals(std::string_view key, std::string_view token) override;
  ConditionInfo doInspectCondition(std::string_view key, std::string_view name) override;

  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace dlock
