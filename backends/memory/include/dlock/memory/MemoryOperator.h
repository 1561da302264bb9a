// SPDX-License-Identifier: Apache-2.0
// MemoryOperator.h — an IOperator in process memory, for unit tests and for users' tests.
//
// It behaves as the Redis backends do: leases expire at their TTL on the injected clock, unlock
// and extend check the token, each key has a fencing counter that grows with every acquisition,
// an acquire by the token that holds the key succeeds again (same fencing token, same expiry,
// as the Redis acquire script), a release wakes one of the key's waiters (watch(): the longest
// registered of those not woken yet, as the Redis release does), and each key keeps
// a record of its last four releases, each until its lease would have ended, so that a retried
// release whose first try ran is told so (ReleaseResult::releasedEarlier). On a VirtualClock, lease expiry is tested in
// microseconds. Faults can be injected: failNextCalls(n) makes the next n calls throw
// ConnectionError; setLatency(d) delays every call by d of real time. An owner label
// (IOwnerRecorder) lives in the lease, with the system clock's time of the acquisition. Read-write
// locks (IReadWriteOperator), semaphores (ISemaphoreOperator) and conditions (IConditionOperator)
// keep the Redis scripts' decisions too. Used in a child after fork(), it is a new, empty one there.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/Clock.h"
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
class MemoryElections;
class MemoryReadWrite;
class MemorySemaphores;
}  // namespace detail

class MemoryOperator final : public IOperator,
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
  explicit MemoryOperator(std::shared_ptr<Clock> clock = SteadyClock::instance());
  ~MemoryOperator() override;

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  AcquireResult lockRecordingOwner(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                                   std::string_view label) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  // One call for the whole batch, as a Redis pipeline is one round trip.
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  // Each kind's own batch call (renewEachKind), counted once in renewalBatches().
  std::vector<ExtendResult> renewBatch(const std::vector<Renewal>& renewals) override;
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override;
  LeaseInfo inspect(std::string_view key) override;
  [[nodiscard]] std::string describe() const override { return "memory://"; }

  // The fair lock's queue, with the Redis scripts' semantics (MemoryFairQueue.h): strict FIFO,
  // hand-off inside the release, waiters skipped once their waiter lease ends on the clock.
  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override;
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override;
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override;
  // Elections' leader records (IElectionOperator, MemoryElection.cpp), on the fair lock's holds.
  bool proclaim(std::string_view key, std::string_view token, std::uint64_t term, std::string_view value) override;
  LeaderRecord readLeader(std::string_view key) override;
  void announce(std::string_view key) override;
  std::unique_ptr<ILeaderWatch> watchLeader(std::string_view key) override;
  // Waiters queued for `key` now (live or not yet pruned), for tests.
  [[nodiscard]] std::size_t queued(std::string_view key) const;

  // Fault injection: the next `count` calls (lock, unlock, extend, extendAll, inspect) throw
  // ConnectionError without touching any lease. raiseFence counts too.
  void failNextCalls(unsigned count);
  // Fault injection: every call first sleeps `latency` (real time). Zero turns it off.
  void setLatency(std::chrono::milliseconds latency);
  // Fault injection: forgets every lease, every release record and every queue, as a Redis
  // server restarted without persistence does. Fencing counters are kept: the Redis counter's clock floor keeps
  // tokens rising after such a restart, and this one keeps them rising too.
  void forgetLeases();

  // Calls received so far (failed ones included; watch() not counted).
  [[nodiscard]] std::uint64_t calls() const noexcept;
  // renewBatch calls so far (each also counted in calls() once per kind it renewed).
  [[nodiscard]] std::uint64_t renewalBatches() const noexcept;
  // Leases alive now.
  [[nodiscard]] std::size_t size() const;
  // The token holding `key` now, or empty — lets tests check what the backend stores.
  [[nodiscard]] std::string holderOf(std::string_view key) const;

  struct State;

 private:
  struct Holder;
  // lock(), recording `label` when given.
  AcquireResult acquire(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                        const std::string_view* label);
  // Counts the call and plays the injected latency and failures; returns state().
  State& beforeCall();
  [[nodiscard]] State& state() const;  // this process's (see Holder)

  // The read-write locks (MemoryReadWrite.cpp), each call counted and faulted as the others.
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
  [[nodiscard]] detail::MemoryReadWrite& readWrite() const;  // this process's
  // The semaphores (MemorySemaphore.cpp), each call counted and faulted as the others.
  SemaphoreAcquireResult doAcquirePermits(std::string_view name, std::string_view token, std::uint32_t permits,
                                          std::uint32_t capacity, std::chrono::milliseconds lease,
                                          std::chrono::milliseconds waiterLease) override;
  ReleaseResult doReleasePermits(std::string_view name, std::string_view token) override;
  bool doExtendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) override;
  bool doLeavePermitQueue(std::string_view name, std::string_view token) override;
  std::unique_ptr<IGrantWatch> doWatchPermitGrants(std::string_view name, std::string_view token) override;
  std::uint32_t doResizeSemaphore(std::string_view name, std::uint32_t capacity) override;
  SemaphoreInfo doInspectSemaphore(std::string_view name) override;
  [[nodiscard]] detail::MemorySemaphores& semaphores() const;  // this process's
  [[nodiscard]] detail::MemoryElections& elections() const;    // this process's
  // The conditions (MemoryCondition.h, applied in MemoryOperator.cpp to the keys they wait on), each
  // call counted and faulted as the others.
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

  std::shared_ptr<Holder> holder_;
};

}  // namespace dlock
