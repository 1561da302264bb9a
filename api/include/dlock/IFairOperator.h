// SPDX-License-Identifier: Apache-2.0
// IFairOperator.h — a backend that keeps one FIFO queue of waiters per key and hands the key
// over to the head waiter when it is released: what the fair lock (LockBuilder::fair) needs
// (FairAcquireResult, Grant, IGrantWatch, IFairOperator). A backend without one queue per key
// (Redlock: a quorum of independent servers) does not offer it.
//
//   fairLock    free and nobody queued ahead (or we head the queue) → taken; ours already → taken
//               again (idempotent); otherwise, with a waiter lease, joined or kept in the queue
//   fairUnlock  ours → handed to the first waiter whose waiter lease has not run out (it becomes
//               the owner for a claim lease, a new fencing token, and is told so), else deleted
//   leaveQueue  out of the queue; a hand-off that reached us meanwhile is released (handed on)
//
// Waiters whose waiter lease ran out (they died, or stopped renewing it) are skipped. Tokens and
// keys reaching it are validated already. Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock {

// The outcome of one fair acquire attempt.
struct FairAcquireResult {
  bool acquired = false;
  std::uint64_t fencingToken = 0;          // when acquired
  // When acquired: as AcquireResult::validity; when ours already (a hand-off), what is left of it.
  std::chrono::milliseconds validity{0};
  std::chrono::milliseconds holderTtl{0};  // when not: the holder's remaining lease, zero if unknown
  std::uint32_t position = 0;              // when queued: 1 is next
  // The backend's clock (ms) when the attempt ran: with a Grant's time, it places the hand-off on
  // the caller's clock without trusting that the two clocks agree.
  std::int64_t backendMillis = 0;
};

// What a waiter heard.
struct Grant {
  enum class Kind : std::uint8_t {
    None,     // nothing before the timeout
    Granted,  // the key was handed to this waiter: it owns it now
    Recheck,  // a hand-off may have been missed (a lost connection, a slot moved): ask fairLock
  };
  Kind kind = Kind::None;
  std::uint64_t fencingToken = 0;  // when granted
  std::int64_t backendMillis = 0;  // when granted: the backend's clock at the hand-off
  // When granted: the claim lease the key was handed over with, from backendMillis: the waiter's
  // ttl, or what was left of its waiter lease if less (so a waiter that died just before its turn
  // blocks the key no longer than its place would have lasted); the waiter then extends it.
  std::chrono::milliseconds lease{0};
};

// Hand-off messages for one waiter (one token), taken before the attempt it follows so that a
// hand-off in between is not missed. Not thread-safe: one waiter.
class IGrantWatch {
 public:
  IGrantWatch() = default;
  IGrantWatch(const IGrantWatch&) = delete;
  IGrantWatch& operator=(const IGrantWatch&) = delete;
  virtual ~IGrantWatch() = default;

  // Blocks until this waiter is granted the key, a hand-off may have been missed, or `timeout`.
  virtual Grant waitForGrant(std::chrono::milliseconds timeout) = 0;

  // As IReleaseWatch::notifyOnRelease: `heard` is called whenever waitForGrant(0) may now return
  // something other than None (a hand-off, or a possible miss), until the watch is destroyed; on a
  // backend's thread, possibly with its locks held, so quick, not throwing, not calling back in.
  // False when the watch cannot: the waiter polls it.
  virtual bool notifyOnGrant(std::function<void()> heard) {
    (void)heard;
    return false;
  }
};

class IFairOperator {
 public:
  IFairOperator() = default;
  IFairOperator(const IFairOperator&) = delete;
  IFairOperator& operator=(const IFairOperator&) = delete;
  virtual ~IFairOperator() = default;

  // One atomic attempt (see the table above). `waiterLease` zero: never queued (tryLock once);
  // otherwise the caller's place lasts `waiterLease` from now unless this is called again.
  virtual FairAcquireResult fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                                     std::chrono::milliseconds waiterLease) = 0;

  // Release with hand-off. As IOperator::unlock: released, not ours, or released earlier by a
  // try whose reply was lost (the backend's record); `notified` is 1 when handed to a waiter.
  virtual ReleaseResult fairUnlock(std::string_view key, std::string_view token) = 0;

  // Leaves the queue of `key` for good (`ttl` as given to fairLock): `token` is not used again,
  // and an attempt with it still on its way is refused. True when the key had been handed to
  // `token` meanwhile (or taken by an attempt whose reply was lost) and was released now.
  virtual bool leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) = 0;

  // Hand-off messages for `token` on `key`.
  virtual std::unique_ptr<IGrantWatch> watchGrants(std::string_view key, std::string_view token) = 0;

  // Why this backend's configuration cannot serve a fair lock (LockBuilder::build throws it as a
  // ConfigError); empty when it can.
  [[nodiscard]] virtual std::string fairUnsupported() const { return {}; }
};

}  // namespace dlock
