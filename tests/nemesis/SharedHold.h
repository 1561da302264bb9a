// SPDX-License-Identifier: Apache-2.0
// SharedHold.h — a read, write or permits hold as the fault tests' workload uses it (SharedRequest,
// ISharedHold, ISharedHolder, makeOperatorHolder): acquire, look whether it still holds, release.
// The workload (Client.cpp) sees only this interface, so the holder over the backend's operators
// here can later be swapped for the core's ReadWriteLock and Semaphore classes.
//
// The holder over the operators (IReadWriteOperator.h, ISemaphoreOperator.h) is one attempt loop:
// watch for grants, attempt with a waiter lease (as long as the hold's lease, so a grant's claim
// never outlives the place it was granted for), wait for a grant or the next expiry, re-attempt
// (which renews the place); a grant counts once the claim's extend says it is this token's. A
// hold is renewed with extendReadWriteAll / extendPermitsAll every third of its lease, as the
// watchdog does; a renewal that answers "not ours", or the local deadline (the last confirmed
// send + the lease) passing, ends it for its holder for good.
//
// It records, with the sink, what the checker needs (History.h ops, message = the owner token):
//   lease    time = the send of an acquisition or renewal the backend confirmed, value = its
//            validity in ms (as LeaseRecorder.h)
//   attempt  time = the attempt's completion, value = "<outcome> <send-ns> <position> <mode>
//            <validity-ms>": outcome `taken` (this attempt acquired, or found it ours already:
//            validity is what it reported, 0 for the whole lease), `queued` (at `position`), or
//            `granted` (a grant's claim confirmed; send = the confirming extend's)
//   lost     a renewal found the hold gone (token = the fencing token)
//   leave-failed  the place (or what an attempt whose reply was lost took) could not be left
// Owner: one client process. Thread safety: a holder is thread-safe; a hold is used by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <dlock/IReadWriteOperator.h>
#include <dlock/ISemaphoreOperator.h>

#include "History.h"

namespace dlock::nemesis {

enum class SharedMode : std::uint8_t { Read, Write, Permits };

[[nodiscard]] const char* sharedModeName(SharedMode mode) noexcept;

struct SharedRequest {
  SharedMode mode = SharedMode::Read;
  std::uint32_t permits = 1;  // Permits only
  std::chrono::milliseconds timeout{1000};
  std::chrono::milliseconds lease{0};  // 0: the holder's, renewed; else a fixed lease, never renewed
};

class ISharedHold {
 public:
  ISharedHold() = default;
  ISharedHold(const ISharedHold&) = delete;
  ISharedHold& operator=(const ISharedHold&) = delete;
  virtual ~ISharedHold() = default;

  // A writer's or permit holder's own token; a reader's is the last writer's.
  [[nodiscard]] virtual std::uint64_t fencingToken() const = 0;
  [[nodiscard]] virtual const std::string& ownerToken() const = 0;
  // False once a renewal found it gone or its local deadline passed.
  [[nodiscard]] virtual bool isHeld() const = 0;
  // Releases it; LockLostError when it had been lost (the backend said not ours).
  virtual void release() = 0;
};

class ISharedHolder {
 public:
  ISharedHolder() = default;
  ISharedHolder(const ISharedHolder&) = delete;
  ISharedHolder& operator=(const ISharedHolder&) = delete;
  virtual ~ISharedHolder() = default;

  // Waits up to request.timeout; null on timeout (its place left). ConnectionError and the like
  // when the backend failed (its place left, as far as the backend can be reached).
  [[nodiscard]] virtual std::unique_ptr<ISharedHold> acquire(const std::string& key, const SharedRequest& request) = 0;
};

// A holder over `readWrite` (Read, Write) and `semaphore` (Permits, of `capacity`), either may be
// null: ConfigError at an acquire of a mode without its operator.
[[nodiscard]] std::shared_ptr<ISharedHolder> makeOperatorHolder(std::shared_ptr<IReadWriteOperator> readWrite,
                                                                std::shared_ptr<ISemaphoreOperator> semaphore,
                                                                std::function<void(Op)> sink,
                                                                std::chrono::milliseconds lease, std::uint32_t capacity);

}  // namespace dlock::nemesis
