// SPDX-License-Identifier: Apache-2.0
// IOperator.h — the backend surface: what a lock needs from a store of leases (AcquireResult,
// ReleaseResult, ExtendResult, LeaseRef, IReleaseWatch, IOperator). Keys and tokens reaching an
// operator are validated already; ttl is positive and at most kMaxLeaseTime. Every call answers
// or throws (ConnectionError, BackendError), never a silent `false`. Fencing-counter raising and
// diagnostics are capabilities beside it (IFenceRaiser, ILeaseInspector).
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IFenceRaiser.h"
#include "dlock/ILeaseInspector.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"

namespace dlock {

// The outcome of one acquire attempt.
struct AcquireResult {
  bool acquired = false;
  // When acquired: a number that strictly grows with every acquisition of this key, for storage
  // layers that must reject writes from a holder whose lease has ended.
  std::uint64_t fencingToken = 0;
  // When acquired: how long, from the moment the attempt was sent, the lease is known to hold;
  // zero means the whole ttl. Redlock reports less (the ttl minus its clock-drift allowance).
  std::chrono::milliseconds validity{0};
  // When not acquired: the holder's remaining lease, which bounds how long a waiter must sleep;
  // zero when unknown.
  std::chrono::milliseconds holderTtl{0};
};

// The outcome of one release.
struct ReleaseResult {
  bool released = false;  // false: the lease had ended or belongs to someone else
  // How many subscribers the release message reached (waiters of this key, in any process);
  // the lock uses it to give waiters a fair chance at the key.
  std::uint32_t notified = 0;
  // When released: by an earlier try of this release whose reply was lost (a connection died
  // under it), as the backend's record of that release shows. A release is reported released
  // only on such evidence: a key found gone, or someone else's, without it was not freed by us.
  bool releasedEarlier = false;
};

// The outcome of renewing one lease (extendAll).
struct ExtendResult {
  bool extended = false;  // false: the lease had ended or belongs to someone else ...
  // ... unless `unknown`: the backend could not reach the node serving this lease (a connection
  // error), so it may still be ours. Only its local deadline ends it then. One node's failure
  // makes only the leases it serves unknown.
  bool unknown = false;
  // When extended: how long, from the moment the renewal was sent, the lease is known to hold;
  // zero means the whole ttl. As AcquireResult::validity: Redlock reports the ttl minus its
  // clock-drift allowance.
  std::chrono::milliseconds validity{0};
};

// One lease in a batch renewal.
struct LeaseRef {
  std::string_view key;
  std::string_view token;
};

// A subscription to release messages of one key, taken before the acquire attempt it follows,
// so a release between that attempt and the wait is not missed. Not thread-safe: one waiter.
class IReleaseWatch {
 public:
  IReleaseWatch() = default;
  IReleaseWatch(const IReleaseWatch&) = delete;
  IReleaseWatch& operator=(const IReleaseWatch&) = delete;
  virtual ~IReleaseWatch() = default;

  // Blocks until a release of the key is seen (true) or `timeout` passes (false). A release seen
  // since the watch was made or since the previous call returned counts at once.
  virtual bool waitForRelease(std::chrono::milliseconds timeout) = 0;

  // Asks the watch to call `heard` whenever waitForRelease(0) may now return true, from then until
  // the watch is destroyed (after its destructor returns, never), so that a waiter without a
  // thread of its own need not poll. `heard` runs on a thread of the backend's, possibly with the
  // backend's own locks held: it must be quick, must not throw, and must not call into the watch or
  // its backend. It may run when nothing was released (waitForRelease(0) then says so). Called at
  // most once per watch. False when the watch cannot: the waiter polls it.
  virtual bool notifyOnRelease(std::function<void()> heard) {
    (void)heard;
    return false;
  }
};

class IOperator {
 public:
  IOperator() = default;
  IOperator(const IOperator&) = delete;
  IOperator& operator=(const IOperator&) = delete;
  virtual ~IOperator() = default;

  // One atomic attempt: take `key` for `token` for `ttl` if it is free.
  virtual AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) = 0;

  // Compare-and-delete: released when `token` held `key` and the key is now free (its waiters
  // are notified); not released when the lease had expired or belongs to someone else. Called
  // again after a try whose reply was lost, it reports released (releasedEarlier) when that try
  // ran: the backend keeps a record of each release at least as long as the lease would have
  // lasted, so a retry is decided by evidence, never by a guess.
  virtual ReleaseResult unlock(std::string_view key, std::string_view token) = 0;

  // Undoes an acquire whose outcome is unknown (lock() threw: it may have run, or may still be on
  // its way to a busy server): releases `key` if `token` holds it, and makes sure that an acquire
  // with `token` arriving later is refused, so it cannot leave a hold nobody owns until its TTL.
  // The caller never uses `token` again. By default unlock(), for a backend whose acquire cannot
  // arrive late (it answers synchronously).
  virtual ReleaseResult cancel(std::string_view key, std::string_view token) { return unlock(key, token); }

  // Compare-and-expire: true when `token` still holds `key`, whose lease now ends in `ttl`.
  virtual bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) = 0;

  // extend() for many leases, as the watchdog renews them; the result has one entry per lease, in
  // order, with the validity of each renewal (what extend() does not report). A lease whose
  // renewal met a ConnectionError is `unknown` (a backend may instead throw when it could settle
  // none).
  // Backends override it to use one round trip per connection; this default makes one call per
  // lease and reports the whole ttl as valid, so a backend that grants less (Redlock) must
  // override it.
  virtual std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
    std::vector<ExtendResult> results(leases.size());
    for (std::size_t i = 0; i < leases.size(); ++i) {
      try {
        results[i].extended = extend(leases[i].key, leases[i].token, ttl);
      } catch (const ConnectionError&) {
        results[i].unknown = true;
      }
    }
    return results;
  }

  // Subscribes to release messages of `key`; nullptr when the backend has none (waiters poll).
  virtual std::unique_ptr<IReleaseWatch> watch(std::string_view /*key*/) { return nullptr; }

  // The backend for messages and logs: "memory://", "redis://127.0.0.1:6379". Never a password.
  [[nodiscard]] virtual std::string describe() const = 0;

  // The backend's IFenceRaiser::raiseFence; ConfigError when it has none. Counters are Redis
  // integers: above 2^63 - 1, InvalidArgumentError before anything is sent.
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) {
    detail::checkFencingToken(atLeast, "raiseFence");
    auto* raiser = dynamic_cast<IFenceRaiser*>(this);
    if (raiser == nullptr) throw ConfigError("dlock: " + describe() + " cannot raise a fencing counter");
    return raiser->raiseFence(key, atLeast);
  }
  // The backend's ILeaseInspector::inspect; ConfigError when it has none.
  [[nodiscard]] LeaseInfo inspect(std::string_view key) {
    auto* inspector = dynamic_cast<ILeaseInspector*>(this);
    if (inspector == nullptr) throw ConfigError("dlock: " + describe() + " cannot inspect a key");
    return inspector->inspect(key);
  }
};

}  // namespace dlock
