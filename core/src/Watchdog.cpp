// SPDX-License-Identifier: Apache-2.0
#include "Watchdog.h"

#include <algorithm>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

namespace {

// Leases the watchdog still has to keep or judge: held, or with a release in doubt. A lease being
// released is its release's to decide.
bool inWatchdogsCare(const LeaseState& lease) {
  const LeasePhase phase = lease.phase();
  return phase == LeasePhase::Held || phase == LeasePhase::InDoubt;
}

}  // namespace

Watchdog::Watchdog(std::shared_ptr<LeaseRenewer> renewer, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
                   std::shared_ptr<LockCounters> counters, std::string lockName)
    : renewer_(std::move(renewer)),
      clock_(std::move(clock)),
      lease_(lease),
      interval_(std::max(std::chrono::milliseconds(1), lease / 3)),
      counters_(std::move(counters)),
      notifier_(std::make_shared<LossNotifier>()),
      lockName_(quoteKey(lockName)) {}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // never joins itself; the thread owns a reference and ends on its own
    } else {
      thread = std::move(thread_);
    }
  }
  wake_.notify_all();
  if (thread.joinable()) thread.join();
  notifier_->stop();
}

void Watchdog::add(std::shared_ptr<LeaseState> lease) {
  {
    std::unique_lock<std::mutex> guard(mutex_);
    if (stopping_) return;
    leases_.push_back(Kept{std::move(lease), {}});
    if (!thread_.joinable()) {
      thread_ = std::thread([self = shared_from_this()] { self->run(); });
      // Return only once the thread waits on the clock, so a virtual clock advanced right after
      // this acquire already counts it among the threads to let settle.
      wake_.wait(guard, [this] { return running_; });
    }
  }
  wake_.notify_all();
}

void Watchdog::setLostHandler(ILock::LostHandler handler) { notifier_->setHandler(std::move(handler)); }

Clock::time_point Watchdog::dueAt(const Kept& kept) const {
  return std::max(kept.lease->deadline() - (lease_ - interval_), kept.retryAt);
}

Clock::time_point Watchdog::nextWake() const {
  Clock::time_point wake = Clock::time_point::max();
  for (const Kept& kept : leases_) {
    if (inWatchdogsCare(*kept.lease)) wake = std::min({wake, dueAt(kept), kept.lease->deadline()});
  }
  return wake;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> guard(mutex_);
  running_ = true;
  wake_.notify_all();
  while (!stopping_) {
    clock_->waitUntil(guard, wake_, nextWake());
    if (stopping_) break;
    const Clock::time_point now = clock_->now();
    leases_.erase(std::remove_if(leases_.begin(), leases_.end(), [](const Kept& k) { return k.lease->finished(); }),
                  leases_.end());
    // Due now, and with them whatever falls due within half an interval (not a retry brought
    // forward: its pause is what keeps an unreachable backend from being asked in a loop).
    std::vector<std::shared_ptr<LeaseState>> due;
    std::vector<std::shared_ptr<LeaseState>> all;
    for (const Kept& kept : leases_) {
      all.push_back(kept.lease);
      if (inWatchdogsCare(*kept.lease) && kept.retryAt <= now && dueAt(kept) <= now + interval_ / 2) {
        due.push_back(kept.lease);
      }
    }
    guard.unlock();
    const std::vector<bool> unanswered = due.empty() ? std::vector<bool>{} : renew(due);
    expireOverdue(all);
    guard.lock();
    for (Kept& kept : leases_) {
      const auto it = std::find(due.begin(), due.end(), kept.lease);
      if (it == due.end()) continue;
      if (!unanswered[static_cast<std::size_t>(it - due.begin())]) {
        kept.retryAt = {};
        continue;
      }
      // Again after a quarter of what the lease has left: several tries before it ends.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kept.lease->deadline() - now);
      kept.retryAt = now + std::clamp(left / 4, std::chrono::milliseconds(1), interval_);
    }
  }
  clock_->forgetWaiter();
}

std::vector<bool> Watchdog::renew(const std::vector<std::shared_ptr<LeaseState>>& batch) {
  const Clock::time_point sentAt = clock_->now();
  std::vector<ExtendResult> results;
  std::string failure;
  try {
    counters_->renewalRoundTrips.fetch_add(1, std::memory_order_relaxed);
    results = renewer_->renewAll(batch, lease_);
  } catch (const std::exception& error) {
    failure = error.what();
  }
  results.resize(batch.size(), ExtendResult{false, true, {}});  // a call that threw settled none
  const auto unknown = std::count_if(results.begin(), results.end(), [](const ExtendResult& r) { return r.unknown; });
  if (unknown > 0) {
    // Without a renewal the lease may still live on the server, but past its local deadline
    // nothing protects the holder any more: expireOverdue() reports it then.
    counters_->renewalFailures.fetch_add(1, std::memory_order_relaxed);
    // A backend that settles some leases says nothing of why the others are unknown (its node
    // could not be reached); one that could settle none throws, and its error is the cause.
    const std::string cause =
        failure.empty() ? "no answer settled them (a node not reached, or replicas that did not acknowledge)" : failure;
    warnRenewalFailure(static_cast<std::size_t>(unknown), batch.size(), cause);
  } else if (logger()->should_log(spdlog::level::debug)) {
    logger()->debug("dlock: lock {}: renewed {} of {} lease(s) on {} for {} ms", lockName_,
                    std::count_if(results.begin(), results.end(), [](const ExtendResult& r) { return r.extended; }),
                    batch.size(), renewer_->describe(), lease_.count());
  }
  std::vector<bool> unanswered(batch.size());
  for (std::size_t i = 0; i < batch.size(); ++i) {
    judge(*batch[i], results[i], sentAt);
    unanswered[i] = results[i].unknown;
  }
  return unanswered;
}

void Watchdog::warnRenewalFailure(std::size_t unknown, std::size_t batch, const std::string& cause) {
  const Clock::time_point now = clock_->now();
  if (lastWarning_ && now - *lastWarning_ < kRenewalWarningInterval) {
    ++warningsLeftOut_;
    logger()->debug("dlock: lock {}: renewing {} of {} lease(s) on {} failed: {}", lockName_, unknown, batch,
                    renewer_->describe(), cause);
    return;
  }
  std::string leftOut;
  if (warningsLeftOut_ > 0) {
    leftOut = " (" + std::to_string(warningsLeftOut_) + " more renewal failure(s) since the last warning, " +
              "not logged: at most one warning per " + std::to_string(kRenewalWarningInterval.count()) + " s)";
  }
  logger()->warn("dlock: lock {}: renewing {} of {} lease(s) on {} failed: {}; each is lost at its own deadline unless "
                 "renewed by then{}",
                 lockName_, unknown, batch, renewer_->describe(), cause, leftOut);
  lastWarning_ = now;
  warningsLeftOut_ = 0;
}

void Watchdog::judge(LeaseState& lease, const ExtendResult& result, Clock::time_point sentAt) {
  if (result.extended) {
    lease.setDeadline(sentAt + knownValidity(result.validity, lease_));
    counters_->renewals.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Unknown: the deadline stands. In doubt: our own release may have removed the key, so its
  // absence proves nothing until the deadline. Being released or finished: not ours to judge.
  if (result.unknown) return;
  markLost(lease, LeasePhase::Held, "the backend no longer has it for this owner");
}

void Watchdog::expireOverdue(const std::vector<std::shared_ptr<LeaseState>>& leases) {
  const Clock::time_point now = clock_->now();
  for (const auto& lease : leases) {
    if (now < lease->deadline()) continue;
    const LeasePhase phase = lease->phase();
    if (phase == LeasePhase::Held || phase == LeasePhase::InDoubt) {
      markLost(*lease, phase, "it could not be renewed before its lease ended");
    }
  }
}

bool Watchdog::markLost(LeaseState& lease, LeasePhase from, const char* why) {
  if (!lease.transition(from, LeasePhase::Lost)) return false;  // released, or reported, meanwhile
  // A Condition waiter's place ends when it is signalled: its waiter sees it, nobody lost a key.
  if (lease.kind == LeaseKind::Awaiting) return true;
  counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
  logger()->warn("dlock: lost the lease of {} (lock {}) on {} (fencing token {}): {}", quoteKey(lease.key), lockName_,
                 renewer_->describe(), lease.fencingToken, why);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return true;
  }
  notifier_->notify(lease.key, lease.fencingToken);
  return true;
}

}  // namespace dlock::detail
