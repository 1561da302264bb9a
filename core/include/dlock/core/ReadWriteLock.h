// SPDX-License-Identifier: Apache-2.0
// ReadWriteLock.h — ReadWriteLock: a distributed java.util.concurrent.locks.ReentrantReadWriteLock
// on named keys, made by LockBuilder::buildReadWrite over a backend with a read-write queue
// (IReadWriteOperator: single Redis, Sentinel, Cluster, memory; not Redlock).
//
//   auto rw = dlock::LockBuilder().backend(dlock::connect(uri)).buildReadWrite();
//   std::shared_ptr<dlock::ILock> r = rw->readLock(), w = rw->writeLock();   // each a whole ILock
//
// Any number of readers, or one writer, per key, across processes. Fair with writer preference:
// once a writer waits, new readers queue behind it, and a release hands the key to the head
// writer or to every reader at the head. Per thread, as ReentrantReadWriteLock: reads and writes
// are reentrant; a writer may take the read lock and downgrade by releasing the write (no queued
// writer gets in between); a reader asking for the write lock gets UpgradeError at once (it would
// wait for itself), and tryUpgrade() is the way up. Holds are leases renewed by the lock's
// watchdog (each reader's own), or of a fixed leaseTime; writers get fencing tokens, a reader the
// last write's. The two ILocks share the lost handler (onLockLost) and stats().
// Every wait takes a CancelToken (InterruptedError). close() of either ILock closes both: every
// wait of the lock ends with InterruptedError, new ones are refused, and the holds this
// process's threads keep are released (logged "released at close"). The last of the
// ReadWriteLock and its two ILocks to be destroyed does the same; Leases stay their holders'.
// Owner: shared (std::shared_ptr). Thread safety: thread-safe.
#pragma once

#include <memory>
#include <string_view>

#include "dlock/ILock.h"
#include "dlock/IReadWriteOperator.h"

namespace dlock {
namespace detail {
class ReadWriteCore;
struct ReadWriteOwners;
}

class ReadWriteLock {
 public:
  // Made by LockBuilder::buildReadWrite.
  explicit ReadWriteLock(std::shared_ptr<detail::ReadWriteCore> core);
  ReadWriteLock(const ReadWriteLock&) = delete;
  ReadWriteLock& operator=(const ReadWriteLock&) = delete;
  ~ReadWriteLock();

  // The read lock and the write lock, each an ILock over the same keys (lock, tryLock, unlock,
  // isHeld, fencingToken, mutex(), acquire() for a Lease handle, ...).
  [[nodiscard]] const std::shared_ptr<ILock>& readLock() const noexcept { return read_; }
  [[nodiscard]] const std::shared_ptr<ILock>& writeLock() const noexcept { return write_; }

  // This thread's read hold of `key` becomes the write hold when it is the key's only reader, in
  // one round trip, never waiting: true, and the thread then holds the write lock once more
  // (release it with writeLock()->unlock(key), which downgrades back to the read hold). False when
  // another reader holds the key. True at once when this thread writes already. NotOwnerError
  // when this thread holds no read lock of `key`; LockLostError when its lease has ended.
  [[nodiscard]] bool tryUpgrade(std::string_view key);

  // What the backend holds for `key`: writer, readers with what each has left, waiters.
  [[nodiscard]] ReadWriteInfo inspect(std::string_view key);

 private:
  const std::shared_ptr<detail::ReadWriteOwners> owners_;  // the last of this and its sides closes the lock
  const std::shared_ptr<detail::ReadWriteCore> core_;
  const std::shared_ptr<ILock> read_;
  const std::shared_ptr<ILock> write_;
};

namespace detail {
// The macros take a ReadWriteLock by reference or by shared_ptr.
inline ReadWriteLock& readWriteOf(ReadWriteLock& lock) noexcept { return lock; }
inline ReadWriteLock& readWriteOf(const std::shared_ptr<ReadWriteLock>& lock) noexcept { return *lock; }
}  // namespace detail

}  // namespace dlock
