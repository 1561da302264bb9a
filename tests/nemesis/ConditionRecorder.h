// SPDX-License-Identifier: Apache-2.0
// ConditionRecorder.h — the bounded buffer's backend as the core's lock and Condition see it: an
// IOperator, IFairOperator and IConditionOperator over the lease evidence (LeaseRecorder.h, which
// records `lease`) and the conditions (the backend's, or a broken double: BrokenCondition.h). The
// workload (Client.cpp) drives the public classes — LockBuilder's default or fair lock and its
// Conditions — over it, and it records what the condition checks (ConditionChecks.h) need from
// the calls those classes made (History.h ops, message = the owner token):
//
//   taken    time = the send of an acquisition the backend confirmed (lock, fairLock, or the
//            claim's extend after a hand-off was heard), value = when its reply came (ns)
//   joined   an await the backend answered "awaiting" (value = the condition's name)
//   woken    the wait of a joined await ended, value "<name> signalled|timeout|lapsed|returned":
//            a signal message or hand-off heard, or a renewal finding the place gone (signalled);
//            a leave of the condition, recorded before it is sent (timeout); the place's waiter
//            lease passing unrenewed (lapsed); the await call returning with none of these seen
//            (returned: closePlace, by the workload)
//
// The thread's last signal's answer (how many waiters it moved) is kept for the workload, which
// records it with the signal: Condition::signal returns nothing.
// Owner: one client process. Thread safety: thread-safe, as the wrapped operators.
#pragma once

#include <dlock/IConditionOperator.h>
#include <dlock/IFairOperator.h>
#include <dlock/ILeaseInspector.h>
#include <dlock/IOperator.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "History.h"

namespace dlock::nemesis {

class ConditionRecorder final : public IOperator,
                                public IFairOperator,
                                public IConditionOperator,
                                public ILeaseInspector {
 public:
  using Sink = std::function<void(Op)>;

  // `lock`: the lease evidence over the backend (LeaseRecorder); `conditions`: the backend's
  // conditions, or a broken double over them.
  ConditionRecorder(std::shared_ptr<IOperator> lock, std::shared_ptr<IConditionOperator> conditions, Sink sink);

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override { return lock_->unlock(key, token); }
  ReleaseResult cancel(std::string_view key, std::string_view token) override { return lock_->cancel(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override { return lock_->watch(key); }
  [[nodiscard]] std::string describe() const override { return lock_->describe(); }

  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override;
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override;
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override;
  [[nodiscard]] std::string fairUnsupported() const override;

  LeaseInfo inspect(std::string_view key) override;

  // The owner token of the acquisition of `key` that got `fencingToken` ("" if none seen).
  [[nodiscard]] std::string ownerOf(const std::string& key, std::uint64_t fencingToken) const;
  // Ends the record of `owner`'s place on `name` when no `woken` was written for it: `lapsed` when
  // its waiter lease had passed unrenewed, else `returned`.
  void closePlace(const std::string& key, const std::string& owner, const std::string& name);
  // How many waiters this thread's last signal or signalAll moved.
  [[nodiscard]] static std::uint32_t lastSignalMoved();

  // A hand-off heard by `token`'s waiter (its grant watch): a signal of its place, and a claim its
  // next confirmed extend takes.
  void heardGrant(const std::string& key, const std::string& token, std::uint64_t fencingToken);
  // A signal message heard by `token`'s waiter on an exclusive key.
  void heardSignal(const std::string& key, const std::string& token);

 private:
  struct Place {
    std::string name;
    std::int64_t untilNs = 0;  // its waiter lease, from the last confirmed send
  };
  using Id = std::pair<std::string, std::string>;  // (key, token)

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

  IFairOperator& queue() const;
  void taken(std::string_view key, std::string_view token, std::uint64_t fence, std::int64_t sentNs);
  // A claim heard for (key, token) confirmed by an extend sent at `sentNs`: taken.
  void confirmClaim(std::string_view key, std::string_view token, std::int64_t sentNs);
  // Writes `woken` for an open place and closes it; nothing when it was closed already.
  void woken(const Id& id, const char* why);
  void wokenIfLapsed(const Id& id);
  // "Not on the condition", answered now for (key, token): recorded as undecided (a move or a
  // lapse) when its place's evidence had ended by then.
  void goneAnswered(const Id& id, const std::string& name);
  void record(const char* op, std::string_view key, std::string_view token, std::string value, std::int64_t timeNs,
              std::uint64_t fence = 0) const;

  std::shared_ptr<IOperator> lock_;
  std::shared_ptr<IConditionOperator> conditions_;
  Sink sink_;
  mutable std::mutex mutex_;
  std::map<Id, Place> places_;                                   // guarded by mutex_: joined, not woken
  // guarded by mutex_: each place's evidence end (untilNs), kept after its waiter woke, for a leave
  // or renewal that answers "not on the condition" later (a move, or a lapse past that end)
  std::map<Id, std::int64_t> evidenceEnds_;
  std::map<Id, std::uint64_t> claims_;  // guarded by mutex_: hand-offs heard, unconfirmed, with their fencing tokens
  std::map<std::pair<std::string, std::uint64_t>, std::string> owners_;  // guarded by mutex_
};

}  // namespace dlock::nemesis
