// IOperator.h — the backend surface: what a lock needs from a store of leases (AcquireResult,
// ReleaseResult, ExtendResult, LeaseRef, IReleaseWatch, IOperator). Keys and tokens reaching an
// operator are validated already; ttl is positive and at most kMaxLeaseTime. Every call answers
// or throws (ConnectionError, BackendError), never a silent `false`. Fencing-counter raising and
// diagnostics are capabilities beside it (IFenceRaiser, ILeaseInspector).
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IFenceRaiser.h"
#include "dlock/ILeaseInspector.h"
#include "dlock/LockError.h"

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
  // When not released: the backend sent this release more than once (a connection died after
  // sending it, before its reply), so an earlier try may be what freed the key. The lock then
  // decides with the lease's local validity: still valid means the key was ours until now.
  bool inDoubt = false;
};

// The outcome of renewing one lease (extendAll).
struct ExtendResult {
  bool extended = false;  // false: the lease had ended or belongs to someone else
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
  // are notified); not released when the lease had expired or belongs to someone else.
  virtual ReleaseResult unlock(std::string_view key, std::string_view token) = 0;

  // Compare-and-expire: true when `token` still holds `key`, whose lease now ends in `ttl`.
  virtual bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) = 0;

  // extend() for many leases, as the watchdog renews them; the result has one entry per lease, in
  // order, with the validity of each renewal (what extend() does not report). Backends override
  // it to use one round trip per connection; this default makes one call per lease and reports
  // the whole ttl as valid, so a backend that grants less (Redlock) must override it.
  virtual std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
    std::vector<ExtendResult> results;
    results.reserve(leases.size());
    for (const auto& lease : leases) results.push_back(ExtendResult{extend(lease.key, lease.token, ttl), {}});
    return results;
  }

  // Subscribes to release messages of `key`; nullptr when the backend has none (waiters poll).
  virtual std::unique_ptr<IReleaseWatch> watch(std::string_view /*key*/) { return nullptr; }

  // The backend for messages and logs: "memory://", "redis://127.0.0.1:6379". Never a password.
  [[nodiscard]] virtual std::string describe() const = 0;

  // The backend's IFenceRaiser::raiseFence; ConfigError when it has none.
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) {
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
