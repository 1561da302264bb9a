#include "LockCore.h"

#include <atomic>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/core/Token.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

std::uint64_t nextLockId() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

milliseconds remainingUntil(ILock::Deadline deadline, SteadyTime now) {
  if (deadline == ILock::Deadline::max()) return milliseconds::max();
  if (now >= deadline) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(deadline - now);
}

}  // namespace

LockCore::LockCore(std::shared_ptr<IOperator> backend, std::shared_ptr<IWait> wait, std::shared_ptr<Clock> clock,
                   LockOptions options)
    : id_(nextLockId()),
      backend_(std::move(backend)),
      wait_(std::move(wait)),
      clock_(std::move(clock)),
      options_(std::move(options)),
      log_(logger()),
      watchdog_(backend_, clock_, options_.watchdogLease, counters_,
                [this](const LeaseState& lease) { reportLost(lease); }) {}

LockCore::~LockCore() = default;

AcquireResult LockCore::attempt(std::string_view key, const std::string& token, milliseconds ttl) {
  counters_.attempts.fetch_add(1, std::memory_order_relaxed);
  try {
    return backend_->lock(key, token, ttl);
  } catch (const ConnectionError&) {
    // The command may have landed before the connection failed. Delete the key if it carries our
    // token, so a throwing acquire leaves nothing held; if that fails too, the lease ends at its TTL.
    try {
      (void)backend_->unlock(key, token);
    } catch (...) {
      log_->debug("dlock: could not clean up {} after a failed acquire; the lease, if any, ends in {} ms",
                  quoteKey(key), ttl.count());
    }
    throw;
  }
}

std::shared_ptr<LeaseState> LockCore::acquire(std::string_view key, Deadline deadline,
                                              std::optional<milliseconds> leaseTime) {
  if (!leaseTime) leaseTime = options_.leaseTime;
  const bool renewed = !leaseTime.has_value();
  const milliseconds ttl = renewed ? options_.watchdogLease : *leaseTime;
  const std::string token = generateToken();

  std::unique_ptr<IReleaseWatch> releases;
  std::optional<SteadyTime> waitingSince;
  const auto stopWaiting = [&](SteadyTime now) {
    if (waitingSince) {
      counters_.waitMillis.fetch_add(std::chrono::duration_cast<milliseconds>(now - *waitingSince).count(),
                                     std::memory_order_relaxed);
    }
  };

  for (unsigned failures = 0;;) {
    const Clock::time_point sentAt = clock_->now();
    const AcquireResult result = attempt(key, token, ttl);
    if (result.acquired) {
      stopWaiting(std::chrono::steady_clock::now());
      counters_.acquisitions.fetch_add(1, std::memory_order_relaxed);
      auto lease = std::make_shared<LeaseState>(std::string(key), token, result.fencingToken, ttl, renewed,
                                                sentAt + ttl);
      if (renewed) watchdog_.add(lease);
      if (log_->should_log(spdlog::level::debug)) {
        log_->debug("dlock: acquired {} on {} (fencing token {})", quoteKey(key), backend_->describe(),
                    result.fencingToken);
      }
      return lease;
    }
    ++failures;
    const SteadyTime now = std::chrono::steady_clock::now();
    if (!waitingSince) waitingSince = now;
    if (deadline == kTryOnce || now >= deadline) {
      stopWaiting(now);
      counters_.failedTries.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    if (!releases && wait_->wantsReleaseWatch()) {
      releases = backend_->watch(key);
      // Subscribed after the failed attempt: try again at once, or a release in between is missed.
      if (releases) continue;
    }
    WaitContext context;
    context.key = key;
    context.attempt = failures;
    context.remaining = remainingUntil(deadline, now);
    context.holderTtl = result.holderTtl;
    context.releases = releases.get();
    wait_->wait(context);
  }
}

void LockCore::release(LeaseState& lease) {
  if (lease.lost.load(std::memory_order_acquire)) {
    lease.finished.store(true, std::memory_order_release);
    throw LockLostError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() +
                        ": the lease was lost while held (fencing token " + std::to_string(lease.fencingToken) +
                        "); the critical section was not protected");
  }
  const bool released = backend_->unlock(lease.key, lease.token);  // a backend error keeps the lease
  lease.finished.store(true, std::memory_order_release);
  if (!released) {
    lease.lost.store(true, std::memory_order_release);
    counters_.lostLeases.fetch_add(1, std::memory_order_relaxed);
    log_->warn("dlock: unlock {} on {}: the lease had ended before unlock", quoteKey(lease.key),
               backend_->describe());
    throw LockLostError("dlock: unlock " + quoteKey(lease.key) + " on " + backend_->describe() +
                        ": the lease had expired or was taken (fencing token " +
                        std::to_string(lease.fencingToken) + "); the critical section was not protected");
  }
  if (log_->should_log(spdlog::level::debug)) {
    log_->debug("dlock: released {} on {}", quoteKey(lease.key), backend_->describe());
  }
}

bool LockCore::releaseQuietly(LeaseState& lease) noexcept {
  try {
    release(lease);
    return true;
  } catch (const LockLostError&) {
    // Already logged and counted.
  } catch (const std::exception& error) {
    lease.finished.store(true, std::memory_order_release);
    try {
      log_->warn("dlock: releasing {} failed: {}; the lease ends on its own within {} ms", quoteKey(lease.key),
                 error.what(), lease.ttl.count());
    } catch (...) {
    }
  } catch (...) {
    lease.finished.store(true, std::memory_order_release);
  }
  return false;
}

void LockCore::setLostHandler(ILock::LostHandler handler) {
  std::lock_guard<std::mutex> guard(handlerMutex_);
  lostHandler_ = std::move(handler);
}

void LockCore::reportLost(const LeaseState& lease) {
  ILock::LostHandler handler;
  {
    std::lock_guard<std::mutex> guard(handlerMutex_);
    handler = lostHandler_;
  }
  if (!handler) return;
  try {
    handler(lease.key, lease.fencingToken);
  } catch (const std::exception& error) {
    log_->warn("dlock: the lock-lost handler threw for {}: {}", quoteKey(lease.key), error.what());
  } catch (...) {
    log_->warn("dlock: the lock-lost handler threw for {}", quoteKey(lease.key));
  }
}

}  // namespace dlock::detail
