// SPDX-License-Identifier: Apache-2.0
// The holder over the read-write and semaphore operators (SharedHold.h): one attempt loop and one
// renewer for the three modes, each mode's backend calls behind ModeCalls.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include <dlock/LockError.h>

#include "HoldRenewal.h"
#include "SharedHold.h"

namespace dlock::nemesis {

const char* sharedModeName(SharedMode mode) noexcept {
  switch (mode) {
    case SharedMode::Read: return "read";
    case SharedMode::Write: return "write";
    case SharedMode::Permits: return "permits";
  }
  return "?";
}

namespace {

using std::chrono::milliseconds;


struct AttemptResult {
  bool acquired = false;
  std::uint64_t fencingToken = 0;
  milliseconds validity{0};  // zero: the whole lease
  std::uint32_t position = 0;
  milliseconds nextExpiry{0};  // zero: unknown
};

// One mode's backend calls.
class ModeCalls {
 public:
  virtual ~ModeCalls() = default;
  virtual AttemptResult attempt(const std::string& key, const std::string& token, milliseconds ttl) = 0;
  virtual ExtendResult renew(const std::string& key, const std::string& token, milliseconds ttl) = 0;
  virtual ReleaseResult release(const std::string& key, const std::string& token) = 0;
  virtual void leave(const std::string& key, const std::string& token, milliseconds ttl) = 0;
  virtual std::unique_ptr<IGrantWatch> watch(const std::string& key, const std::string& token) = 0;
  [[nodiscard]] virtual const char* mode() const = 0;
};

class ReadWriteCalls final : public ModeCalls {
 public:
  ReadWriteCalls(std::shared_ptr<IReadWriteOperator> ops, ReadWriteMode mode) : ops_(std::move(ops)), mode_(mode) {}

  AttemptResult attempt(const std::string& key, const std::string& token, milliseconds ttl) override {
    const FairAcquireResult result = mode_ == ReadWriteMode::Read ? ops_->acquireRead(key, token, ttl, ttl)
                                                                  : ops_->acquireWrite(key, token, ttl, ttl);
    return AttemptResult{result.acquired, result.fencingToken, result.validity, result.position, result.holderTtl};
  }
  ExtendResult renew(const std::string& key, const std::string& token, milliseconds ttl) override {
    const auto results = ops_->extendReadWriteAll({ReadWriteLease{key, token, mode_}}, ttl);
    return results.empty() ? ExtendResult{false, true, {}} : results.front();
  }
  ReleaseResult release(const std::string& key, const std::string& token) override {
    return mode_ == ReadWriteMode::Read ? ops_->releaseRead(key, token) : ops_->releaseWrite(key, token);
  }
  void leave(const std::string& key, const std::string& token, milliseconds ttl) override {
    (void)ops_->leaveReadWriteQueue(key, token, mode_, ttl);
  }
  std::unique_ptr<IGrantWatch> watch(const std::string& key, const std::string& token) override {
    return ops_->watchReadWriteGrants(key, token);
  }
  [[nodiscard]] const char* mode() const override { return mode_ == ReadWriteMode::Read ? "read" : "write"; }

 private:
  std::shared_ptr<IReadWriteOperator> ops_;
  ReadWriteMode mode_;
};

class PermitCalls final : public ModeCalls {
 public:
  PermitCalls(std::shared_ptr<ISemaphoreOperator> ops, std::uint32_t permits, std::uint32_t capacity)
      : ops_(std::move(ops)), permits_(permits), capacity_(capacity) {}

  AttemptResult attempt(const std::string& key, const std::string& token, milliseconds ttl) override {
    const SemaphoreAcquireResult result = ops_->acquirePermits(key, token, permits_, capacity_, ttl, ttl);
    return AttemptResult{result.acquired, result.fencingToken, result.validity, result.position, result.nextExpiry};
  }
  ExtendResult renew(const std::string& key, const std::string& token, milliseconds ttl) override {
    const auto results = ops_->extendPermitsAll({LeaseRef{key, token}}, ttl);
    return results.empty() ? ExtendResult{false, true, {}} : results.front();
  }
  ReleaseResult release(const std::string& key, const std::string& token) override {
    return ops_->releasePermits(key, token);
  }
  void leave(const std::string& key, const std::string& token, milliseconds) override {
    (void)ops_->leavePermitQueue(key, token);
  }
  std::unique_ptr<IGrantWatch> watch(const std::string& key, const std::string& token) override {
    return ops_->watchPermitGrants(key, token);
  }
  [[nodiscard]] const char* mode() const override { return "permits"; }

 private:
  std::shared_ptr<ISemaphoreOperator> ops_;
  std::uint32_t permits_;
  std::uint32_t capacity_;
};

using Sink = std::function<void(Op)>;


// Runs `call` until it answers or `deadline` passes, as the lock rides out an outage inside its
// wait: a ConnectionError with time left is tried again after a short pause (never a hot loop
// of failing acquisitions); the last one is thrown.
template <typename Call>
auto untilDeadline(std::chrono::steady_clock::time_point deadline, Call&& call) -> decltype(call()) {
  while (true) {
    try {
      return call();
    } catch (const ConnectionError&) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::steady_clock::duration::zero()) throw;
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, milliseconds(50)));
    }
  }
}

std::int64_t validUntil(std::int64_t sentNs, milliseconds validity, milliseconds ttl) {
  return sentNs + (validity.count() > 0 ? validity : ttl).count() * 1'000'000;
}

class OperatorHold final : public ISharedHold {
 public:
  OperatorHold(std::unique_ptr<ModeCalls> calls, Sink sink, std::string key, std::string token, std::uint64_t fence,
               milliseconds ttl, std::int64_t deadlineNs, bool renewed)
      : calls_(std::move(calls)), sink_(std::move(sink)), key_(std::move(key)), token_(std::move(token)),
        fence_(fence), ttl_(ttl), deadlineNs_(deadlineNs) {
    if (renewed) {
      renewal_.start({[this] { return calls_->renew(key_, token_, ttl_); }, sink_, key_, token_, fence_, ttl_, &deadlineNs_,
                      &lost_});
    }
  }
  ~OperatorHold() override {
    stopRenewing();
    if (released_) return;
    try {
      (void)calls_->release(key_, token_);
    } catch (...) {  // its lease ends on its own
    }
  }

  [[nodiscard]] std::uint64_t fencingToken() const override { return fence_; }
  [[nodiscard]] const std::string& ownerToken() const override { return token_; }
  [[nodiscard]] bool isHeld() const override { return !lost_ && monotonicNs() < deadlineNs_.load(); }

  void release() override {
    stopRenewing();
    const ReleaseResult result = calls_->release(key_, token_);
    released_ = true;
    if (!result.released) {
      throw LockLostError("dlock: release '" + key_ + "': not ours (the lease had ended or was taken)");
    }
  }

 private:
  void stopRenewing() { renewal_.stop(); }

  std::unique_ptr<ModeCalls> calls_;
  Sink sink_;
  std::string key_;
  std::string token_;
  std::uint64_t fence_;
  milliseconds ttl_;
  std::atomic<std::int64_t> deadlineNs_;
  std::atomic<bool> lost_{false};
  bool released_ = false;
  HoldRenewal renewal_;
};

class OperatorHolder final : public ISharedHolder {
 public:
  OperatorHolder(std::shared_ptr<IReadWriteOperator> readWrite, std::shared_ptr<ISemaphoreOperator> semaphore,
                 Sink sink, milliseconds lease, std::uint32_t capacity)
      : readWrite_(std::move(readWrite)), semaphore_(std::move(semaphore)), sink_(std::move(sink)), lease_(lease),
        capacity_(capacity) {}

  std::unique_ptr<ISharedHold> acquire(const std::string& key, const SharedRequest& request) override {
    std::unique_ptr<ModeCalls> calls = callsFor(request);
    const std::string token = newOwnerToken();
    const milliseconds ttl = request.lease.count() > 0 ? request.lease : lease_;
    try {
      return attemptUntil(std::move(calls), key, token, ttl, request);
    } catch (const LockError&) {
      leaveQuietly(*callsFor(request), key, token, ttl);
      throw;
    }
  }

 private:
  std::unique_ptr<ModeCalls> callsFor(const SharedRequest& request) const {
    if (request.mode == SharedMode::Permits) {
      if (!semaphore_) throw ConfigError("dlock_nemesis_client: this backend has no semaphore");
      return std::make_unique<PermitCalls>(semaphore_, request.permits, capacity_);
    }
    if (!readWrite_) throw ConfigError("dlock_nemesis_client: this backend has no read-write lock");
    return std::make_unique<ReadWriteCalls>(readWrite_,
                                            request.mode == SharedMode::Read ? ReadWriteMode::Read : ReadWriteMode::Write);
  }

  // A leave that could not be sent is recorded: the place, and any permits a lost reply took,
  // end with their leases instead.
  void leaveQuietly(ModeCalls& calls, const std::string& key, const std::string& token, milliseconds ttl) const {
    try {
      calls.leave(key, token, ttl);
    } catch (...) {
      recordHoldOp(sink_, "leave-failed", key, token, "", monotonicNs());
    }
  }

  // An attempt's record (SharedHold.h): its outcome, send, place, mode and the validity it reported.
  void recordAttempt(const ModeCalls& calls, const char* outcome, const std::string& key, const std::string& token,
                     std::int64_t sentNs, std::uint32_t position, milliseconds validity) const {
    recordHoldOp(sink_, "attempt", key, token,
             std::string(outcome) + " " + std::to_string(sentNs) + " " + std::to_string(position) + " " + calls.mode() +
                 " " + std::to_string(validity.count()),
             monotonicNs());
  }

  // Attempt, wait for a grant or the next expiry, attempt again (renewing the place), until taken,
  // a grant confirmed, or the timeout.
  std::unique_ptr<ISharedHold> attemptUntil(std::unique_ptr<ModeCalls> calls, const std::string& key,
                                            const std::string& token, milliseconds ttl, const SharedRequest& request) {
    const auto deadline = std::chrono::steady_clock::now() + request.timeout;
    const std::unique_ptr<IGrantWatch> grants = untilDeadline(deadline, [&] { return calls->watch(key, token); });
    const bool renewed = request.lease.count() == 0;
    while (true) {
      std::int64_t sent = 0;
      const AttemptResult result = untilDeadline(deadline, [&] {
        sent = monotonicNs();
        return calls->attempt(key, token, ttl);
      });
      if (result.acquired) {
        std::int64_t until = validUntil(sent, result.validity, ttl);
        recordHoldOp(sink_, "lease", key, token, std::to_string((until - sent) / 1'000'000), sent);
        recordAttempt(*calls, "taken", key, token, sent, 0, result.validity);
        // Ours already with part of a lease (a grant whose message is on its way): made whole at
        // once, as a grant's claim is, so that a hold lasts its lease from here.
        if (result.validity.count() > 0) {
          const std::int64_t renewSent = monotonicNs();
          if (calls->renew(key, token, ttl).extended) {
            until = validUntil(renewSent, milliseconds(0), ttl);
            recordHoldOp(sink_, "lease", key, token, std::to_string(ttl.count()), renewSent);
          }
        }
        return std::make_unique<OperatorHold>(std::move(calls), sink_, key, token, result.fencingToken, ttl, until,
                                              renewed);
      }
      recordAttempt(*calls, "queued", key, token, sent, result.position, milliseconds(0));
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        leaveQuietly(*calls, key, token, ttl);
        return nullptr;
      }
      milliseconds wait = std::min(std::chrono::duration_cast<milliseconds>(deadline - now) + milliseconds(1), ttl / 3);
      if (result.nextExpiry.count() > 0) wait = std::min(wait, result.nextExpiry + milliseconds(5));
      const Grant grant = grants->waitForGrant(std::max(wait, milliseconds(1)));
      if (grant.kind != Grant::Kind::Granted) continue;
      const std::int64_t confirmSent = monotonicNs();
      if (!calls->renew(key, token, ttl).extended) continue;  // no grant without the server's word
      const std::int64_t until = validUntil(confirmSent, milliseconds(0), ttl);
      recordHoldOp(sink_, "lease", key, token, std::to_string(ttl.count()), confirmSent);
      recordAttempt(*calls, "granted", key, token, confirmSent, 0, milliseconds(0));
      return std::make_unique<OperatorHold>(std::move(calls), sink_, key, token, grant.fencingToken, ttl, until, renewed);
    }
  }

  std::shared_ptr<IReadWriteOperator> readWrite_;
  std::shared_ptr<ISemaphoreOperator> semaphore_;
  Sink sink_;
  milliseconds lease_;
  std::uint32_t capacity_;
};

}  // namespace

std::shared_ptr<ISharedHolder> makeOperatorHolder(std::shared_ptr<IReadWriteOperator> readWrite,
                                                  std::shared_ptr<ISemaphoreOperator> semaphore,
                                                  std::function<void(Op)> sink, milliseconds lease,
                                                  std::uint32_t capacity) {
  return std::make_shared<OperatorHolder>(std::move(readWrite), std::move(semaphore), std::move(sink), lease, capacity);
}

}  // namespace dlock::nemesis
