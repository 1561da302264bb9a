// SPDX-License-Identifier: Apache-2.0
// AsyncQueue.h — what an asynchronous acquire of a queued primitive (the fair lock) asks of it: a
// place in the server's queue, that place's hand-off watch, and the key taken once it is the
// place's. AsyncAcquirer (AsyncAcquirer.h) drives it, on its workers; the server decides every
// outcome (a hand-off message only makes the waiter ask).
// Owner: one lock's AsyncAcquirer. Thread safety: thread-safe (each call is about one token).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "dlock/Cancel.h"
#include "dlock/IFairOperator.h"
#include "dlock/Lease.h"

namespace dlock::detail {

// A healthy server answers a leave within this; else the lock's cleanup lane leaves (not the
// acquirer's worker, which other operations wait for).
inline constexpr std::chrono::milliseconds kAsyncLeaveBudget{50};

class AsyncQueue {
 public:
  using Lifetime = std::optional<std::chrono::milliseconds>;  // the hold's lease time; unset: the lock's

  AsyncQueue() = default;
  AsyncQueue(const AsyncQueue&) = delete;
  AsyncQueue& operator=(const AsyncQueue&) = delete;
  virtual ~AsyncQueue() = default;

  // One try that joins `token`'s place at the tail, or renews it where it is: acquired when the
  // key is the token's now (take() makes it a Lease); backendMillis dates it (a grant older than
  // the last join answered an earlier one). Throws what the backend throws.
  virtual FairAcquireResult join(const std::string& key, const std::string& token, Lifetime leaseTime) = 0;
  // A hand-off `grant` heard for `token`, confirmed by the server: the Lease, or an empty one when
  // the key is not the token's (any more); the place stays either way. Throws what the backend
  // throws (the place stays then too).
  virtual Lease claim(const std::string& key, const std::string& token, const Grant& grant, Lifetime leaseTime) = 0;
  // Hand-off messages for `token`, made before its first join.
  virtual std::unique_ptr<IGrantWatch> watch(const std::string& key, const std::string& token) = 0;
  // The key as a Lease when it is `token`'s now (one try that never queues), else an empty Lease
  // and the place as it was. A try cut off leaves the place: the token is never used again.
  virtual Lease take(const std::string& key, const std::string& token, Lifetime leaseTime,
                     const CancelToken& cancel) = 0;
  // Out of the queue for good; a hand-off that reached `token` is passed on. Within a short budget,
  // else on the lock's cleanup lane; a place that cannot be left ends with its waiter lease.
  virtual void leave(const std::string& key, const std::string& token, Lifetime leaseTime) noexcept = 0;
  // How often a place is renewed (a join again), so that it outlives its waiter lease.
  [[nodiscard]] virtual std::chrono::milliseconds renewal() const noexcept = 0;
};

}  // namespace dlock::detail
