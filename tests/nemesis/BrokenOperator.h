// SPDX-License-Identifier: Apache-2.0
// BrokenOperator.h — deliberately broken locks for `dlock_nemesis_client --broken <variant>`, so
// that every check is seen failing (scripts/nemesis --broken). Test code only: the library stays
// as it is, and each variant wraps the IOperator the client builds its lock on, or the clock.
//
//   renewal           extend/extendAll claim success without asking the server (no owner check)
//   fence-repeat      an acquisition reports the fencing token of this client's previous one of
//                     the key (tokens that do not increase)
//   in-doubt-released an unlock that found the key not ours reports it released (the defect of
//                     an in-doubt release counted as released)
//   no-deadline       the lock runs on a clock ten times slower than real time: leases never end
//                     locally before the server's (no effective local deadline)
//   late-deadline     the server is asked for a lease 40 ms shorter than the lock counts on: the
//                     lease's local deadline is 40 ms late (the audit's case)
//   no-notice         the client ignores onLockLost and isHeld() and records a release that threw
//                     LockLostError as ok (Client.cpp): only the store and the other clients'
//                     records can show its losses
//   lost-reply-acquired  an acquire whose reply was lost (ConnectionError) counts as taken
//   fair-grant-unconfirmed  a fair claim's extend answers true whatever the server said, and a
//                     hand-off message is read as current whatever attempt it answered: a
//                     hand-off taken without the server's word (defect 1's two faults as a switch)
//   stuck-after-error after its first ConnectionError, every call fails with one (no recovery)
//   untyped-error     a ConnectionError of an acquire surfaces as a std::runtime_error
//   refuses-first-key the first key of the workload ("nemesis-0") is never granted: no fault
//                     finds a holder of it
// and those that break the server's side, below the lease evidence (LeaseRecorder.h), as a wrong
// script would (single server only: RawServer.h):
//   release-check     every release is a script that deletes the key whoever holds it
//                     (broken/ReleaseWithoutOwnerCheck.h), sent in place of the library's
//   release-deletes   a release that finds the key not ours deletes it when under 300 ms are left
//   takes-held-key    an acquire that finds the key held with under 300 ms left takes it
//   no-ttl            an acquisition leaves the key without a TTL
//   fair-order        a fair release hands the key to the newest waiter: the newest is moved to
//                     the queue's head first (tests/integration/broken/FairReleaseToNewest.h)
// Owner: one client process. Thread safety: thread-safe, as the wrapped operator.
#pragma once

#include <dlock/Clock.h>
#include <dlock/IFairOperator.h>
#include <dlock/IOperator.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dlock::nemesis {

class RawServer;

// The variants that wrap the operator or the clock; "" and "no-notice" need neither.
[[nodiscard]] const std::vector<std::string>& brokenVariants();
// Whether `variant` breaks the server's side: it goes under the lease evidence, not over it.
[[nodiscard]] bool breaksServerSide(const std::string& variant);

class BrokenOperator final : public IOperator, public IFairOperator {
 public:
  // `uri`: the lock server's, for the variants that break the server's side.
  BrokenOperator(std::shared_ptr<IOperator> inner, std::string variant, const std::string& uri = "");
  ~BrokenOperator() override;

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  ReleaseResult cancel(std::string_view key, std::string_view token) override { return inner_->cancel(key, token); }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }
  [[nodiscard]] std::string describe() const override { return inner_->describe() + " (broken: " + variant_ + ")"; }

  FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override {
    return queue().fairLock(key, token, ttl, waiterLease);
  }
  ReleaseResult fairUnlock(std::string_view key, std::string_view token) override;
  bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return queue().leaveQueue(key, token, ttl);
  }
  std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) override;
  [[nodiscard]] std::string fairUnsupported() const override;

 private:
  IFairOperator& queue() const;
  // Runs `call`, as stuck-after-error breaks it.
  template <typename Call>
  auto guarded(Call&& call) -> decltype(call());

  std::shared_ptr<IOperator> inner_;
  std::string variant_;
  std::unique_ptr<RawServer> raw_;
  std::atomic<bool> stuck_{false};  // stuck-after-error: a ConnectionError was seen
  std::mutex mutex_;
  std::map<std::string, std::uint64_t, std::less<>> previousToken_;  // guarded by mutex_
};

// Steady time slowed down `factor` times from its construction on.
class SlowClock final : public Clock {
 public:
  explicit SlowClock(int factor) : factor_(factor), start_(std::chrono::steady_clock::now()) {}

  [[nodiscard]] time_point now() const override { return start_ + (std::chrono::steady_clock::now() - start_) / factor_; }
  void waitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) override {
    const duration left = deadline - start_;
    if (deadline == time_point::max() || left > duration::max() / factor_ - (std::chrono::steady_clock::now() - start_)) {
      cv.wait(lock);  // never in real time either
      return;
    }
    cv.wait_until(lock, start_ + left * factor_);
  }

 private:
  int factor_;
  time_point start_;
};

}  // namespace dlock::nemesis
