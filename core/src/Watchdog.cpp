#include "Watchdog.h"

#include <algorithm>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

Watchdog::Watchdog(std::shared_ptr<IOperator> backend, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
                   std::shared_ptr<LockCounters> counters)
    : backend_(std::move(backend)),
      clock_(std::move(clock)),
      lease_(lease),
      interval_(std::max(std::chrono::milliseconds(1), lease / 3)),
      counters_(std::move(counters)) {}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
      // A lost handler dropped the last reference to the lock: this is the watchdog's own
      // thread, which must not join itself. It owns a reference to this watchdog and ends once
      // the handler returns.
      thread_.detach();
    } else {
      thread = std::move(thread_);
    }
  }
  wake_.notify_all();
  if (thread.joinable()) thread.join();
}

void Watchdog::add(std::shared_ptr<LeaseState> lease) {
  {
    std::unique_lock<std::mutex> guard(mutex_);
    if (stopping_) return;
    leases_.push_back(std::move(lease));
    if (nextTick_ == Clock::time_point::max()) nextTick_ = clock_->now() + interval_;
    if (!thread_.joinable()) {
      thread_ = std::thread([self = shared_from_this()] { self->run(); });
      // Return only once the thread waits on the clock, so a virtual clock advanced right after
      // this acquire already counts it among the threads to let settle.
      wake_.wait(guard, [this] { return running_; });
    }
  }
  wake_.notify_all();
}

void Watchdog::setLostHandler(ILock::LostHandler handler) {
  std::lock_guard<std::mutex> guard(mutex_);
  lostHandler_ = std::move(handler);
}

void Watchdog::run() {
  std::unique_lock<std::mutex> guard(mutex_);
  running_ = true;
  wake_.notify_all();
  while (!stopping_) {
    clock_->waitUntil(guard, wake_, nextTick_);
    if (stopping_) break;
    if (clock_->now() < nextTick_) continue;

    leases_.erase(std::remove_if(leases_.begin(), leases_.end(),
                                 [](const auto& lease) { return lease->finished.load(std::memory_order_acquire); }),
                  leases_.end());
    const std::vector<std::shared_ptr<LeaseState>> batch = leases_;
    nextTick_ = batch.empty() ? Clock::time_point::max() : clock_->now() + interval_;
    guard.unlock();
    if (!batch.empty()) renew(batch);
    guard.lock();
  }
  clock_->forgetWaiter();
}

void Watchdog::renew(const std::vector<std::shared_ptr<LeaseState>>& batch) {
  std::vector<LeaseRef> refs;
  refs.reserve(batch.size());
  for (const auto& lease : batch) refs.push_back(LeaseRef{lease->key, lease->token});

  const Clock::time_point sentAt = clock_->now();
  std::vector<ExtendResult> results;
  try {
    counters_->renewalRoundTrips.fetch_add(1, std::memory_order_relaxed);
    results = backend_->extendAll(refs, lease_);
  } catch (const std::exception& error) {
    counters_->renewalFailures.fetch_add(1, std::memory_order_relaxed);
    logger()->warn("dlock: renewing {} lease(s) on {} failed: {}", batch.size(), backend_->describe(), error.what());
    // Without a renewal the lease may still live on the server, but past its local deadline
    // nothing protects the holder any more. A lease being released is left to its release.
    const Clock::time_point now = clock_->now();
    for (const auto& lease : batch) {
      if (!lease->finished.load(std::memory_order_acquire) && !lease->releasing.load(std::memory_order_acquire) &&
          now >= lease->deadline()) {
        markLost(*lease, "it could not be renewed before its lease ended");
      }
    }
    return;
  }

  if (logger()->should_log(spdlog::level::debug)) {
    logger()->debug("dlock: renewed {} of {} lease(s) on {} for {} ms",
                    std::count_if(results.begin(), results.end(), [](const ExtendResult& r) { return r.extended; }),
                    batch.size(), backend_->describe(), lease_.count());
  }
  for (std::size_t i = 0; i < batch.size(); ++i) {
    LeaseState& lease = *batch[i];
    if (i < results.size() && results[i].extended) {
      lease.setDeadline(sentAt + knownValidity(results[i].validity, lease_));
      counters_->renewals.fetch_add(1, std::memory_order_relaxed);
    } else if (lease.finished.load(std::memory_order_acquire) || lease.releasing.load(std::memory_order_acquire)) {
      // Released, or a release is on its way and may be what removed the key: not lost.
    } else if (lease.releaseInDoubt.load(std::memory_order_acquire)) {
      // An earlier release may have removed the key: its absence proves nothing, as with a
      // renewal that failed, until the lease has run out.
      if (clock_->now() >= lease.deadline()) markLost(lease, "it was not renewed before its lease ended");
    } else {
      markLost(lease, "the backend no longer has it for this owner");
    }
  }
}

void Watchdog::markLost(LeaseState& lease, const char* why) {
  if (lease.lost.exchange(true, std::memory_order_acq_rel)) return;
  lease.finished.store(true, std::memory_order_release);
  counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
  logger()->warn("dlock: lost the lease of {} on {} (fencing token {}): {}", quoteKey(lease.key),
                 backend_->describe(), lease.fencingToken, why);
  ILock::LostHandler handler;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return;  // the lock is gone (an earlier handler may have dropped it)
    handler = lostHandler_;  // a copy: the handler may destroy the lock, and the stored one with it
  }
  if (!handler) return;
  try {
    handler(lease.key, lease.fencingToken);
  } catch (const std::exception& error) {
    logger()->warn("dlock: the lock-lost handler threw for {}: {}", quoteKey(lease.key), error.what());
  } catch (...) {
    logger()->warn("dlock: the lock-lost handler threw for {}", quoteKey(lease.key));
  }
}

}  // namespace dlock::detail
