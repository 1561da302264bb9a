// SPDX-License-Identifier: Apache-2.0
// ReadWriteSide.h — the read lock or the write lock of a ReadWriteLock, each a whole ILock, with
// the thread holds of java.util.concurrent.locks.ReentrantReadWriteLock. Each side keeps its
// thread holds in RequestIdHolder under its own id (ReadWriteCore::sideId).
//
//   this thread holds      read lock(k)                      write lock(k)
//   nothing                waits for a read hold             waits for the write hold
//   the read lock          count + 1                         UpgradeError at once (never waits)
//   the write lock         a read hold carried by the write  count + 1
//                          (no round trip)
//
//   write unlock at count 0, with a read hold: the backend's downgrade (one step; the read hold
//   keeps the place, no queued writer gets in between), the read hold gets a lease of its own
//   read unlock of a hold carried by the write: counted down only (the write still holds)
//
// A read hold carried by the write has the write's lease (kind Write): valid while the write is,
// and its fencing token is the write's (a reader's token is the last write's). After
// ReadWriteLock::tryUpgrade the read hold is carried by the new write in the same way.
// close() of either side closes the lock (both sides share one core: ReadWriteCore::close); so
// does the last of the ReadWriteLock and its two sides to go (ReadWriteOwners).
// Owner: shared (by the ReadWriteLock). Thread safety: thread-safe.
#pragma once

#include <memory>

#include "ReadWriteCore.h"
#include "async/AsyncAcquirer.h"
#include "dlock/detail/Fork.h"
#include "dlock/ILock.h"
#include "dlock/core/RequestIdHolder.h"

namespace dlock::detail {

class ReadWriteSide final : public ILock {
 public:
  ReadWriteSide(std::shared_ptr<ReadWriteOwners> owners, ReadWriteMode mode);
  ~ReadWriteSide() override { async_->close(); }

  // True when `hold`, this thread's read hold, is carried by its write hold (it has no lease of
  // its own).
  static bool carried(const RequestIdHolder::Hold& hold) { return hold.lease->kind == LeaseKind::Write; }

 private:
  bool doAcquire(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                 const CancelToken& cancel) override;
  void doUnlock(std::string_view key) override;
  bool doUnlockQuietly(std::string_view key) noexcept override;
  [[nodiscard]] bool doIsHeld(std::string_view key) const override;
  [[nodiscard]] unsigned doHoldCount(std::string_view key) const override;
  [[nodiscard]] std::uint64_t doFencingToken(std::string_view key) const override;
  Lease doAcquireLease(std::string_view key, Deadline deadline, std::optional<std::chrono::milliseconds> leaseTime,
                       const CancelToken& cancel) override;
  void doExtend(std::string_view key, std::chrono::milliseconds ttl) override;
  [[nodiscard]] std::chrono::milliseconds doRemainingLease(std::string_view key) const override;
  void doClose() noexcept override {
    async_->close();  // first: its tries in flight use the core
    core_->close();
  }
  AsyncAcquisition& doAsyncAcquisition() override { return *async_; }
  void doOnLockLost(LostHandler handler) override;
  // ConfigError: a read-write lock keeps no conditions (the JDK's read lock has none either).
  [[nodiscard]] Condition doNewCondition(std::string_view key, std::string_view name) override;
  [[nodiscard]] LockStats doStats() const override;
  [[nodiscard]] const std::string& doDefaultKey() const noexcept override;

  // This thread's hold of `key` on this side, or on the other.
  [[nodiscard]] RequestIdHolder::Hold* own(std::string_view key) const;
  [[nodiscard]] RequestIdHolder::Hold* other(std::string_view key) const;
  // A further hold of `hold` (reentry); LockLostError when its lease has ended.
  void reenter(RequestIdHolder::Hold& hold, std::string_view key);
  // Releases this thread's last hold of `key` on this side (`hold`), downgrading a write that
  // carries a read hold. The hold is forgotten unless a backend error leaves it for a retry.
  void releaseLast(RequestIdHolder::Hold& hold, std::string_view key);
  [[noreturn]] void throwNotHeld(const char* operation, std::string_view key) const;
  [[noreturn]] void throwEnded(const char* operation, std::string_view key) const;
  // Forgets this thread's hold of `key` on this side (RequestIdHolder and the core's kept holds).
  void erase(std::string_view key, const RequestIdHolder::Hold& hold) noexcept;

  const std::shared_ptr<ReadWriteOwners> owners_;
  const std::shared_ptr<ReadWriteCore> core_;  // owners_'s
  const ReadWriteMode mode_;
  const char* const name_;  // "read" or "write", for messages
  // acquireAsync's (a waiter holds a place in the name's queue); a forked child has none of its parent's
  ForkLocal<AsyncAcquirer> async_;
};

}  // namespace dlock::detail
