// SPDX-License-Identifier: Apache-2.0
// ReadWriteCore.h — the read-write lock's algorithm over IReadWriteOperator, shared by its read
// and write sides (ReadWriteSide.h) and their Lease handles: acquire a read or a write hold
// through the one wait loop (ReadWriteAttempt), release with hand-off, downgrade (the write given
// up for a read hold in one step) and tryUpgrade (the sole reader becomes the writer). Every hold
// is a LeaseState of kind Read or Write, renewed by one watchdog in one batch (ReadWriteRenewer).
// Kept alive by the ReadWriteLock, its sides and every Lease they handed out. close() (of either
// side, or when the last of the ReadWriteLock and its sides goes: ReadWriteOwners) ends the waits
// of both sides and releases the thread holds they keep (keep()); Leases are their holders'.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "CleanupLane.h"
#include "FairBackend.h"
#include "KeptHolds.h"
#include "LeaseState.h"
#include "LockCounters.h"
#include "ReadWriteQueue.h"
#include "Watchdog.h"
#include "WatchdogHost.h"
#include "dlock/Cancel.h"
#include "dlock/Clock.h"
#include "dlock/ILock.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/LockOptions.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

class ReadWriteCore {
 public:
  using Deadline = ILock::Deadline;

  // `rw` is `backend`'s (checked by LockBuilder::buildReadWrite); `options` validated there.
  // `watchdogs`: the watchdog thread shared with other primitives (on `clock`); null: its own.
  ReadWriteCore(std::shared_ptr<IOperator> backend, IReadWriteOperator& rw, std::shared_ptr<Clock> clock,
                LockOptions options, std::shared_ptr<WatchdogHost> watchdogs = nullptr);
  ReadWriteCore(const ReadWriteCore&) = delete;
  ReadWriteCore& operator=(const ReadWriteCore&) = delete;
  ~ReadWriteCore();

  // A `mode` hold of `key` for a new token, waiting until `deadline`; nullptr on timeout. Throws
  // what the backend throws, or InterruptedError (`cancel`, or close(): before or during the
  // wait); then nothing is held.
  std::shared_ptr<LeaseState> acquire(ReadWriteMode mode, std::string_view key, Deadline deadline,
                                      std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel);

  // For an async waiter (ReadWriteAsyncQueue.h), as LockCore's for the fair lock's: one try that
  // joins or renews `token`'s place for a `mode` hold; its hand-off watch; a hand-off confirmed
  // (this mode's hold extended: nullptr when not the token's); the hold taken when it is the
  // token's (one try that never queues); the place left for good, within `deadline`, else on the
  // cleanup lane.
  FairAcquireResult joinQueue(ReadWriteMode mode, std::string_view key, const std::string& token,
                              std::optional<std::chrono::milliseconds> leaseTime);
  std::unique_ptr<IGrantWatch> watchGrants(ReadWriteMode mode, std::string_view key, const std::string& token);
  std::shared_ptr<LeaseState> claimGrant(ReadWriteMode mode, std::string_view key, const std::string& token,
                                         std::uint64_t fencingToken, std::optional<std::chrono::milliseconds> leaseTime);
  std::shared_ptr<LeaseState> takeAs(ReadWriteMode mode, std::string_view key,
                                     std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel,
                                     std::string token);
  void leaveQueue(ReadWriteMode mode, std::string_view key, const std::string& token,
                  std::optional<std::chrono::milliseconds> leaseTime, CallBudget::TimePoint deadline) noexcept;
  [[nodiscard]] const std::shared_ptr<IOperator>& backend() const noexcept { return backend_; }

  // Thread holds kept for close(), and close() itself, as LockCore's (KeptHolds.h): closing
  // ends the waits of both sides and releases the holds of both.
  void keep(const std::shared_ptr<LeaseState>& lease) { holds_.keep(lease); }
  void forget(const LeaseState& lease) noexcept { holds_.forget(lease); }
  void close() noexcept { holds_.close(); }
  [[nodiscard]] bool closed() const noexcept { return holds_.closed(); }
  [[noreturn]] void throwClosed(const std::string& what) const { holds_.throwClosed(what); }
  // ILock::extend of a fixed-lease hold (its own mode only) and remainingLease (FixedLease.h).
  void extend(LeaseState& lease, std::chrono::milliseconds ttl);
  [[nodiscard]] std::chrono::milliseconds remaining(const LeaseState& lease) const;

  // Releases a read or write hold (by its kind), as LockCore::release: Released on the server's
  // word while valid, else LockLostError; a backend error keeps it for a retry.
  void release(LeaseState& lease);
  bool releaseQuietly(LeaseState& lease) noexcept;

  // Gives up the write `write` for a read hold of the same token in one step (the backend's
  // downgrade: no writer queued behind gets in between): the new read lease, kept for close() in
  // the write's stead. LockLostError when
  // the write had ended (then no read hold either); a backend error keeps the write for a retry.
  std::shared_ptr<LeaseState> downgrade(LeaseState& write);

  // The sole reader `read` becomes the writer (never waits): the write lease, of the same token
  // and a new fencing token; the read lease is finished (the server dropped it). nullptr when
  // refused (another reader, a writer). The write is kept for close() in the read's stead. A ConnectionError releases a write the upgrade may have
  // taken before it is thrown.
  std::shared_ptr<LeaseState> tryUpgrade(LeaseState& read);

  [[nodiscard]] bool isValid(const LeaseState& lease) const { return lease.validAt(clock_->now()); }
  // The lock's clock now (the gauges' read time).
  [[nodiscard]] Clock::time_point now() const { return clock_->now(); }
  [[nodiscard]] ReadWriteInfo inspect(std::string_view key) { return rw_.inspectReadWrite(key); }

  void setLostHandler(ILock::LostHandler handler);
  [[nodiscard]] LockStats stats() const { return counters_->snapshot(); }
  [[nodiscard]] const LockOptions& options() const noexcept { return options_; }
  [[nodiscard]] std::string describe() const { return backend_->describe(); }
  LockCounters& counters() noexcept { return *counters_; }
  [[nodiscard]] const LockCounters& counters() const noexcept { return *counters_; }
  // The RequestIdHolder id of each side's thread holds.
  [[nodiscard]] std::uint64_t sideId(ReadWriteMode mode) const noexcept {
    return mode == ReadWriteMode::Read ? readId_ : readId_ + 1;
  }

 private:
  std::shared_ptr<LeaseState> acquireAs(ReadWriteMode mode, std::string_view key, Deadline deadline,
                                        std::optional<std::chrono::milliseconds> leaseTime, const CancelToken& cancel,
                                        std::string token);
  [[nodiscard]] std::chrono::milliseconds ttlFor(std::optional<std::chrono::milliseconds> leaseTime) const {
    if (!leaseTime) leaseTime = options_.leaseTime;
    return leaseTime ? *leaseTime : options_.watchdogLease;
  }
  std::shared_ptr<LeaseState> holding(std::string_view key, ReadWriteMode mode, std::string token,
                                      std::uint64_t fencingToken, Clock::time_point sentAt,
                                      std::chrono::milliseconds validity, std::chrono::milliseconds ttl, bool renewed);
  // Settles a release-like call's answer for `lease` (in Releasing; `valid`: before it began).
  void settle(LeaseState& lease, bool valid, const ReleaseResult& result);
  [[noreturn]] void throwLost(LeaseState& lease, bool releasing, const char* what);
  // Moves `lease` to Releasing, or throws what a lease that cannot be released says.
  LeasePhase beginRelease(LeaseState& lease);
  // Runs `call` for `lease` (in Releasing), restoring its phase as LockCore::release does on a throw.
  template <class Call>
  auto releasing(LeaseState& lease, bool valid, LeasePhase from, Call call);
  std::shared_ptr<Watchdog> makeWatchdog();
  [[nodiscard]] FairBackend& side(ReadWriteMode mode) const { return mode == ReadWriteMode::Read ? *read_ : *write_; }
  [[nodiscard]] FairBackend& side(const LeaseState& lease) const {
    return lease.kind == LeaseKind::Read ? *read_ : *write_;
  }
  // Keeps `now` for close() in place of `before` (a downgrade, an upgrade). Closed meanwhile:
  // `now` was released at close, and the thread's next unlock of it says so.
  void rekeep(const LeaseState& before, const std::shared_ptr<LeaseState>& now) noexcept;

  const std::uint64_t readId_;
  const std::shared_ptr<IOperator> backend_;
  IReadWriteOperator& rw_;  // backend_'s
  const std::shared_ptr<FairBackend> read_;   // the read side as a fair queue
  const std::shared_ptr<FairBackend> write_;  // the write side
  const std::shared_ptr<Clock> clock_;
  Clock* const waitClock_;  // waitClockOf(clock_): the waits' clock, nullptr for the steady one
  const LockOptions options_;
  const std::shared_ptr<LockCounters> counters_;
  const std::shared_ptr<WatchdogHost> watchdogs_;  // the shared watchdog thread; null: the lock's own

  ForkSafeMutex handlerMutex_;
  ILock::LostHandler lostHandler_;  // guarded by handlerMutex_

  ForkLocal<CleanupLane> cleanup_;
  KeptHolds holds_;  // the close token every wait listens to, and the thread holds close() releases
  ForkLocal<Watchdog> watchdog_;  // last: made from the members above
};

// Shared by a ReadWriteLock and its two sides: the last of them to go closes the core, as
// destroying a DistributedLock closes its (the Leases they handed out keep only the core).
struct ReadWriteOwners {
  explicit ReadWriteOwners(std::shared_ptr<ReadWriteCore> coreIn) : core(std::move(coreIn)) {}
  ReadWriteOwners(const ReadWriteOwners&) = delete;
  ReadWriteOwners& operator=(const ReadWriteOwners&) = delete;
  ~ReadWriteOwners() { core->close(); }
  const std::shared_ptr<ReadWriteCore> core;
};

}  // namespace dlock::detail
