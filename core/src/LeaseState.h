// LeaseState.h — one acquisition as the lock, the watchdog and a Lease handle share it.
// Thread safety: the mutable fields are atomics; the rest is fixed at construction.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "dlock/Clock.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

// How long a lease taken or renewed for `ttl` is known to hold from the moment the request was
// sent, given the validity the backend reported (AcquireResult/ExtendResult::validity: zero
// means the whole ttl). One rule for acquisitions and renewals.
inline std::chrono::milliseconds knownValidity(std::chrono::milliseconds reported, std::chrono::milliseconds ttl) {
  return reported.count() > 0 ? std::min(reported, ttl) : ttl;
}

struct LeaseState {
  LeaseState(std::string keyIn, std::string tokenIn, std::uint64_t fence, std::chrono::milliseconds ttlIn,
             bool renewedIn, Clock::time_point deadline)
      : key(std::move(keyIn)),
        token(std::move(tokenIn)),
        fencingToken(fence),
        ttl(ttlIn),
        renewed(renewedIn),
        deadlineNanos(deadline.time_since_epoch().count()) {}

  const std::string key;
  const std::string token;
  const std::uint64_t fencingToken;
  const std::chrono::milliseconds ttl;
  const bool renewed;  // kept alive by the watchdog

  // When the lease ends on the lock's clock, as far as this client knows: the time the acquire
  // (or the last renewal) was sent plus its known validity, so the estimate errs on the early side.
  std::atomic<Clock::duration::rep> deadlineNanos;
  std::atomic<bool> lost{false};      // the backend no longer has it for us
  std::atomic<bool> finished{false};  // released or abandoned: the watchdog lets it go
  // A lease acquired before a fork() is the parent's: a child never renews or releases it.
  const std::uint64_t forkGenerationAtAcquire = forkGeneration();
  // A release is on its way: a renewal that finds the key gone now may be seeing that release,
  // so the watchdog leaves the verdict to it. Set before the release is sent.
  std::atomic<bool> releasing{false};
  // An earlier release failed with a ConnectionError and may have run: the key may be gone by
  // our own hand, so its absence alone does not make the lease lost.
  std::atomic<bool> releaseInDoubt{false};

  [[nodiscard]] bool inheritedAcrossFork() const { return forkGenerationAtAcquire != forkGeneration(); }

  [[nodiscard]] Clock::time_point deadline() const {
    return Clock::time_point(Clock::duration(deadlineNanos.load(std::memory_order_acquire)));
  }
  void setDeadline(Clock::time_point deadline) {
    deadlineNanos.store(deadline.time_since_epoch().count(), std::memory_order_release);
  }
  [[nodiscard]] bool validAt(Clock::time_point now) const {
    return !lost.load(std::memory_order_acquire) && now < deadline() && !inheritedAcrossFork();
  }
};

}  // namespace dlock::detail
