// SPDX-License-Identifier: Apache-2.0
// IReadWriteOperator.h — a backend that keeps a read-write lock per name on the fair queue's
// hand-off: one writer, or any number of readers each with its own lease (in the backend's
// time), and one FIFO queue of waiting readers and writers (ReadWriteMode, ReadWriteLease,
// ReadWriteInfo, IReadWriteOperator). A backend without one queue per name (Redlock) does not
// offer it. Each hold is one token's; reentrancy is the caller's.
//
//   acquire read    ours already → the same answer; held by this token as writer → a read hold
//                   too, at once (the first step of a downgrade); no writer and nobody queued →
//                   taken; otherwise queued (writer preference: once a writer waits, a new reader
//                   queues behind it)
//   acquire write   ours already → the same answer; nobody holds and nobody queued → taken, a new
//                   fencing token; a reader's own token → refused, never queued (see tryUpgrade);
//                   otherwise queued
//   release         ours → gone, and the queue's head goes on: a writer if nobody holds, or every
//                   reader at the head (consecutive) while no writer holds; each admitted waiter
//                   gets a new hold (a claim lease: its ttl, or what is left of its waiter lease
//                   if less) and a Grant on its process's channel
//   downgrade       the writer takes a read hold and gives up the write in one step: no writer
//                   queued behind it gets in before that read hold ends
//   tryUpgrade      the sole reader becomes the writer; anything else is refused at once
//   leave           out of the queue; a hold granted to it meanwhile is released (handed on), and
//                   a later attempt with the token is refused (a tombstone)
//
// Writers get fencing tokens (max(last + 1, the backend's clock in µs)); a reader gets the last
// writer's (0 before any). Readers whose lease ended and waiters whose waiter lease ended are
// dropped by every call that decides on them. Releases leave a record per token, so a retried
// release is decided by evidence. Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/Validation.h"

namespace dlock {

enum class ReadWriteMode : std::uint8_t { Read, Write };

// One hold in a batch renewal.
struct ReadWriteLease {
  std::string_view name;
  std::string_view token;
  ReadWriteMode mode = ReadWriteMode::Read;
};

// What the backend holds for one name (inspectReadWrite), for diagnostics and `dlock status`.
struct ReadWriteInfo {
  struct Hold {
    std::string token;
    std::chrono::milliseconds remaining{0};
  };
  struct Waiter {
    std::string token;
    ReadWriteMode mode = ReadWriteMode::Read;
  };
  std::optional<Hold> writer;   // the writer, if one holds
  std::vector<Hold> readers;    // live read holds, by lease end
  std::vector<Waiter> waiters;  // live waiters, head first
  std::uint64_t fencingToken = 0;  // the last writer's; 0 if none yet
};

class IReadWriteOperator {
 public:
  IReadWriteOperator() = default;
  IReadWriteOperator(const IReadWriteOperator&) = delete;
  IReadWriteOperator& operator=(const IReadWriteOperator&) = delete;
  virtual ~IReadWriteOperator() = default;

  // One atomic attempt (see the table above). `waiterLease` zero: never queued (try once);
  // otherwise the caller's place lasts `waiterLease` from now unless this is called again. When
  // acquired, `validity` is what is left of a hold that was ours already (zero: the whole ttl).
  // Not acquired: `holderTtl` is the longest remaining hold (writer or reader), `position` the
  // place in the queue (1 is next; 0 when not queued).
  FairAcquireResult acquireRead(std::string_view name, std::string_view token, std::chrono::milliseconds ttl,
                                std::chrono::milliseconds waiterLease) {
    check(name, token, ttl, waiterLease, "acquireRead");
    return doAcquire(name, token, ReadWriteMode::Read, ttl, waiterLease);
  }
  FairAcquireResult acquireWrite(std::string_view name, std::string_view token, std::chrono::milliseconds ttl,
                                 std::chrono::milliseconds waiterLease) {
    check(name, token, ttl, waiterLease, "acquireWrite");
    return doAcquire(name, token, ReadWriteMode::Write, ttl, waiterLease);
  }

  // Release with hand-off, as IFairOperator::fairUnlock: released, not ours, or released earlier
  // by a try whose reply was lost (the backend's record of this token's release of this mode);
  // `notified` is how many waiters were admitted. Releasing the write of a token that also has
  // a read hold keeps the read hold.
  ReleaseResult releaseRead(std::string_view name, std::string_view token) {
    check(name, token, "releaseRead");
    return doRelease(name, token, ReadWriteMode::Read);
  }
  ReleaseResult releaseWrite(std::string_view name, std::string_view token) {
    check(name, token, "releaseWrite");
    return doRelease(name, token, ReadWriteMode::Write);
  }

  // The writer `token` takes a read hold for `ttl` and gives up the write, atomically; readers at
  // the head of the queue are admitted beside it. False when `token` is not the writer (and has no
  // read hold from an earlier try of this call).
  bool downgrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) {
    check(name, token, ttl, std::chrono::milliseconds(0), "downgrade");
    return doDowngrade(name, token, ttl);
  }

  // The sole live reader `token`, with no writer, becomes the writer for `ttl` (a new fencing
  // token); never queued. Not acquired otherwise (another reader, a writer).
  FairAcquireResult tryUpgrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) {
    check(name, token, ttl, std::chrono::milliseconds(0), "tryUpgrade");
    return doTryUpgrade(name, token, ttl);
  }

  // Renews the `mode` hold of `token` only (never another's) to end `ttl` from now: true when it
  // was live.
  bool extendReadWrite(const ReadWriteLease& lease, std::chrono::milliseconds ttl) {
    check(lease.name, lease.token, ttl, std::chrono::milliseconds(0), "extend");
    return doExtend(lease, ttl);
  }
  // extendReadWrite for the watchdog's batch: one entry per hold, in order, as IOperator::extendAll
  // (`unknown` when the node serving it could not be reached).
  std::vector<ExtendResult> extendReadWriteAll(const std::vector<ReadWriteLease>& leases, std::chrono::milliseconds ttl) {
    for (const auto& lease : leases) check(lease.name, lease.token, ttl, std::chrono::milliseconds(0), "extend");
    return doExtendAll(leases, ttl);
  }

  // Leaves the queue of `name` for good (`mode` and `ttl` as given to the acquire): `token` is not
  // used again, and an attempt with it still on its way is refused. True when a hold had been
  // granted to `token` meanwhile and was released now.
  bool leaveReadWriteQueue(std::string_view name, std::string_view token, ReadWriteMode mode,
                           std::chrono::milliseconds ttl) {
    check(name, token, ttl, std::chrono::milliseconds(0), "leaveReadWriteQueue");
    return doLeave(name, token, mode, ttl);
  }

  // Hand-off messages for `token` on `name`, taken before the attempt they follow.
  std::unique_ptr<IGrantWatch> watchReadWriteGrants(std::string_view name, std::string_view token) {
    check(name, token, "watchReadWriteGrants");
    return doWatch(name, token);
  }

  // Reads the state of `name` without changing it.
  ReadWriteInfo inspectReadWrite(std::string_view name) {
    detail::checkKey(name, "inspectReadWrite");
    return doInspect(name);
  }

  // Why this backend's configuration cannot serve a read-write lock; empty when it can.
  [[nodiscard]] virtual std::string readWriteUnsupported() const { return {}; }

 private:
  virtual FairAcquireResult doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                                      std::chrono::milliseconds ttl, std::chrono::milliseconds waiterLease) = 0;
  virtual ReleaseResult doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) = 0;
  virtual bool doDowngrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl) = 0;
  virtual FairAcquireResult doTryUpgrade(std::string_view name, std::string_view token,
                                         std::chrono::milliseconds ttl) = 0;
  virtual bool doExtend(const ReadWriteLease& lease, std::chrono::milliseconds ttl) = 0;
  virtual std::vector<ExtendResult> doExtendAll(const std::vector<ReadWriteLease>& leases,
                                                std::chrono::milliseconds ttl) = 0;
  virtual bool doLeave(std::string_view name, std::string_view token, ReadWriteMode mode,
                       std::chrono::milliseconds ttl) = 0;
  virtual std::unique_ptr<IGrantWatch> doWatch(std::string_view name, std::string_view token) = 0;
  virtual ReadWriteInfo doInspect(std::string_view name) = 0;

  // Bad input is refused before anything is sent.
  static void check(std::string_view name, std::string_view token, const char* operation) {
    detail::checkKey(name, operation);
    detail::checkToken(token, operation);
  }
  static void check(std::string_view name, std::string_view token, std::chrono::milliseconds ttl,
                    std::chrono::milliseconds waiterLease, const char* operation) {
    check(name, token, operation);
    detail::checkLeaseTime(ttl, "the lease", operation);
    if (waiterLease.count() != 0) detail::checkLeaseTime(waiterLease, "the waiter lease", operation);
  }
};

}  // namespace dlock
