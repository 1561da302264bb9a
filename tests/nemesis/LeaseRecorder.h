// SPDX-License-Identifier: Apache-2.0
// LeaseRecorder.h — the evidence of a lease's validity, taken at the operator: an IOperator (and
// IFairOperator) over the client's backend that records, for every acquisition or renewal the
// backend confirmed, when it was SENT and how long it holds from then (History.h op `lease`:
// time_ns = the send, value = the validity in ms, message = the owner token). The checker bounds
// each hold's section with these records alone (send + validity: AcquireResult::validity, zero
// meaning the whole ttl), never with what the lock told its holder.
//
// It sits directly on the backend, under any broken variant (BrokenOperator.h), so a variant that
// asks the server for less than it tells the lock, or counts an unanswered attempt as taken, is
// recorded as the server saw it. A fair hand-off is placed as the lock places it: at the waiter's
// last attempt that found it waiting, moved on by the backend's clock to the hand-off, for the
// claim lease the grant carries; the claim's extend is a renewal like any other.
// ElectionRecorder.h adds an election's leader records to it.
// Owner: one client process. Thread safety: thread-safe, as the wrapped operator.
#pragma once

#include <dlock/IFairOperator.h>
#include <dlock/IOperator.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

// The fair queue of `inner`, for a wrapper that forwards it (ConfigError when it has none), and
// why `inner` cannot serve a fair lock ("" when it can).
[[nodiscard]] IFairOperator& fairQueueOf(IOperator& inner);
[[nodiscard]] std::string fairUnsupportedBy(const IOperator& inner);

class LeaseRecorder : public IOperator, public IFairOperator, public ILeaseInspector {
 public:
  using Sink = std::function<void(Op)>;

  LeaseRecorder(std::shared_ptr<IOperator> inner, Sink sink);

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override { return inner_->unlock(key, token); }
  ReleaseResult cancel(std::string_view key, std::string_view token) override { return inner_->cancel(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }

  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override;
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override { return queue().fairUnlock(key, token); }
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override;
  [[nodiscard]] std::string fairUnsupported() const override;

  LeaseInfo inspect(std::string_view key) override { return inner_->inspect(key); }

  // A grant heard by a waiter: recorded at its place on this host's clock (see above).
  void granted(const std::string& key, const std::string& token, const Grant& grant);

 private:
  // The waiter's last attempt that found it queued: sent at `sentNs`, run at `backendMillis`.
  struct Anchor {
    std::int64_t sentNs = 0;
    std::int64_t backendMillis = 0;
  };

  IFairOperator& queue() const;
  void record(std::string_view key, std::string_view token, std::int64_t sentNs, std::chrono::milliseconds validity,
              std::uint64_t fence) const;

  std::shared_ptr<IOperator> inner_;
  Sink sink_;
  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, Anchor> anchors_;  // guarded by mutex_; by (key, token)
};

}  // namespace dlock::nemesis
