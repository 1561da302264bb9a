// SPDX-License-Identifier: Apache-2.0
#include "Watchdog.h"

#include <algorithm>
#include <utility>

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

Watchdog::Watchdog(std::shared_ptr<WatchdogThread> thread, std::shared_ptr<LeaseRenewer> renewer,
                   std::shared_ptr<IRenewalBatch> batch, std::chrono::milliseconds lease,
                   std::shared_ptr<LockCounters> counters, std::string lockName)
    : thread_(std::move(thread)),
      renewer_(std::move(renewer)),
      batch_(std::move(batch)),
      clock_(thread_->clock()),
      lease_(lease),
      interval_(std::max(std::chrono::milliseconds(1), lease / 3)),
      counters_(std::move(counters)),
      notifier_(std::make_shared<LossNotifier>()),
      lockName_(quoteKey(lockName)) {}

Watchdog::Watchdog(std::shared_ptr<LeaseRenewer> renewer, std::shared_ptr<Clock> clock, std::chrono::milliseconds lease,
                   std::shared_ptr<LockCounters> counters, std::string lockName)
    : Watchdog(std::make_shared<WatchdogThread>(std::move(clock)), std::move(renewer), nullptr, lease,
               std::move(counters), std::move(lockName)) {}

Watchdog::~Watchdog() { stop(); }

void Watchdog::stop() {
  stopped_.store(true, std::memory_order_release);
  thread_->remove(*this);
  notifier_->stop();
}

void Watchdog::add(std::shared_ptr<LeaseState> lease) {
  if (stopped_.load(std::memory_order_acquire)) return;
  thread_->add(shared_from_this(), std::move(lease));
}

void Watchdog::resumeCare() { thread_->resumeCare(); }

void Watchdog::setLostHandler(ILock::LostHandler handler) { notifier_->setHandler(std::move(handler)); }

void Watchdog::judgeRound(const std::vector<std::shared_ptr<LeaseState>>& batch,
                          const std::vector<ExtendResult>& results, Clock::time_point sentAt,
                          const std::string& failure) {
  counters_->renewalRoundTrips.fetch_add(1, std::memory_order_relaxed);
  const auto unknown = std::count_if(results.begin(), results.end(), [](const ExtendResult& r) { return r.unknown; });
  if (unknown > 0) {
    // Without a renewal the lease may still live on the server, but past its local deadline
    // nothing protects the holder any more: expireIfOverdue() reports it then.
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
  for (std::size_t i = 0; i < batch.size(); ++i) judge(*batch[i], results[i], sentAt);
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

void Watchdog::expireIfOverdue(LeaseState& lease, Clock::time_point now) {
  if (now < lease.deadline()) return;
  const LeasePhase phase = lease.phase();
  if (phase == LeasePhase::Held || phase == LeasePhase::InDoubt) {
    markLost(lease, phase, "it could not be renewed before its lease ended");
  }
}

bool Watchdog::markLost(LeaseState& lease, LeasePhase from, const char* why) {
  if (!lease.transition(from, LeasePhase::Lost)) return false;  // released, or reported, meanwhile
  // A Condition waiter's place ends when it is signalled: its waiter sees it, nobody lost a key.
  if (lease.kind == LeaseKind::Awaiting) return true;
  counters_->lostLeases.fetch_add(1, std::memory_order_relaxed);
  logger()->warn("dlock: lost the lease of {} (lock {}) on {} (fencing token {}): {}", quoteKey(lease.key), lockName_,
                 renewer_->describe(), lease.fencingToken, why);
  if (stopped_.load(std::memory_order_acquire)) return true;
  notifier_->notify(lease.key, lease.fencingToken);
  return true;
}

}  // namespace dlock::detail
