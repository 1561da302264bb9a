// SPDX-License-Identifier: Apache-2.0
#include "WatchdogThread.h"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "Watchdog.h"

namespace dlock::detail {
namespace {

// Leases the watchdog still has to keep or judge: held, or with a release in doubt. A lease being
// released is its release's to decide.
bool inWatchdogsCare(const LeaseState& lease) {
  const LeasePhase phase = lease.phase();
  return phase == LeasePhase::Held || phase == LeasePhase::InDoubt;
}

RenewalKind renewalKindOf(LeaseKind kind) {
  switch (kind) {
    case LeaseKind::Exclusive: return RenewalKind::Exclusive;
    case LeaseKind::Read: return RenewalKind::Read;
    case LeaseKind::Write: return RenewalKind::Write;
    case LeaseKind::Permits: return RenewalKind::Permits;
    case LeaseKind::Awaiting: return RenewalKind::Awaiting;
  }
  return RenewalKind::Exclusive;
}

// A lease due in a round, with the primitive it is renewed for.
struct Due {
  std::shared_ptr<LeaseState> lease;
  std::shared_ptr<Watchdog> owner;
};

// One call of a round: the leases it renews, by primitive, in the order of the call.
struct RoundCall {
  std::vector<Due> leases;
  std::vector<ExtendResult> results;
  std::string failure;
};

}  // namespace

class WatchdogThread::Core : public std::enable_shared_from_this<WatchdogThread::Core> {
 public:
  explicit Core(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

  void add(const std::shared_ptr<Watchdog>& owner, std::shared_ptr<LeaseState> lease) {
    {
      std::unique_lock<std::mutex> guard(mutex_);
      if (stopping_) return;
      leases_.push_back(Kept{std::move(lease), owner, owner.get(), owner->lease(), owner->interval(), {}});
      if (!thread_.joinable()) {
        thread_ = std::thread([self = shared_from_this()] { self->run(); });
        // Return only once the thread waits on the clock, so a virtual clock advanced right after
        // this acquire already counts it among the threads to let settle.
        wake_.wait(guard, [this] { return running_; });
      }
    }
    wake_.notify_all();
  }

  // A lease came back into the watchdog's care (a release that failed: in doubt, or held again).
  // The thread may have gone to sleep while it was being released, with a wake time that left it
  // out: wake it, and return once it sleeps again with one that counts it (as add() does, so a
  // virtual clock advanced right after counts it too).
  void resumeCare() {
    std::unique_lock<std::mutex> guard(mutex_);
    if (!thread_.joinable() || stopping_ || thread_.get_id() == std::this_thread::get_id()) return;
    rewake_ = true;
    wake_.notify_all();
    settled_.wait(guard, [this] { return !rewake_ || stopping_; });
  }

  void remove(const Watchdog& owner) {
    std::unique_lock<std::mutex> guard(mutex_);
    leases_.erase(std::remove_if(leases_.begin(), leases_.end(), [&](const Kept& k) { return k.ownerId == &owner; }),
                  leases_.end());
    if (thread_.get_id() == std::this_thread::get_id()) return;  // a round of this thread: it ends with it
    settled_.wait(guard, [this] { return !renewing_; });
  }

  void stop() {
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
    settled_.notify_all();  // a resumeCare() waiting
    if (thread.joinable()) thread.join();
  }

  [[nodiscard]] const std::shared_ptr<Clock>& clock() const noexcept { return clock_; }

 private:
  // A lease the watchdog keeps, its primitive, and when a renewal that got no answer may be tried again.
  struct Kept {
    std::shared_ptr<LeaseState> lease;
    std::weak_ptr<Watchdog> owner;
    const Watchdog* ownerId;
    std::chrono::milliseconds leaseLength;  // the owner's, copied: read under mutex_ without the owner
    std::chrono::milliseconds interval;
    Clock::time_point retryAt{};
  };

  // When `kept` is next due for renewal: a third of the lease after its last one, or its retry.
  static Clock::time_point dueAt(const Kept& kept) {
    return std::max(kept.lease->deadline() - (kept.leaseLength - kept.interval), kept.retryAt);
  }

  // The time the thread must next wake: the first renewal due, or an earlier lease deadline. mutex_ held.
  [[nodiscard]] Clock::time_point nextWake() const {
    Clock::time_point wake = Clock::time_point::max();
    for (const Kept& kept : leases_) {
      if (inWatchdogsCare(*kept.lease)) wake = std::min({wake, dueAt(kept), kept.lease->deadline()});
    }
    return wake;
  }

  void run() {
    ::pthread_setname_np(::pthread_self(), kThreadName);
    std::unique_lock<std::mutex> guard(mutex_);
    running_ = true;
    wake_.notify_all();
    while (!stopping_) {
      if (rewake_) {  // seen: resumeCare() returns once this thread waits with the wake computed below
        rewake_ = false;
        settled_.notify_all();
      }
      clock_->waitUntil(guard, wake_, nextWake());
      if (stopping_) break;
      tick(guard);
    }
    clock_->forgetWaiter();
  }

  // One round: renews what is due, reports what is overdue. `guard` held on entry and return.
  void tick(std::unique_lock<std::mutex>& guard) {
    const Clock::time_point now = clock_->now();
    leases_.erase(std::remove_if(leases_.begin(), leases_.end(),
                                 [](const Kept& k) { return k.lease->finished() || k.owner.expired(); }),
                  leases_.end());
    // Due now, and with them whatever falls due within half an interval (not a retry brought
    // forward: its pause is what keeps an unreachable backend from being asked in a loop).
    std::vector<Due> due;
    std::vector<Due> all;
    for (const Kept& kept : leases_) {
      std::shared_ptr<Watchdog> owner = kept.owner.lock();
      if (!owner) continue;
      if (inWatchdogsCare(*kept.lease) && kept.retryAt <= now && dueAt(kept) <= now + kept.interval / 2) {
        due.push_back(Due{kept.lease, owner});
      }
      all.push_back(Due{kept.lease, std::move(owner)});
    }
    renewing_ = true;
    guard.unlock();
    const std::vector<LeaseState*> unanswered = renew(due);
    const Clock::time_point after = clock_->now();
    for (const Due& each : all) each.owner->expireIfOverdue(*each.lease, after);
    // The owners go before the mutex is taken again: the last reference may stop one (remove()).
    due.clear();
    all.clear();
    guard.lock();
    renewing_ = false;
    settled_.notify_all();
    for (Kept& kept : leases_) {
      if (std::find(unanswered.begin(), unanswered.end(), kept.lease.get()) == unanswered.end()) {
        if (kept.retryAt <= now) kept.retryAt = {};
        continue;
      }
      // Again after a quarter of what the lease has left: several tries before it ends.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(kept.lease->deadline() - now);
      kept.retryAt = now + std::clamp(left / 4, std::chrono::milliseconds(1), kept.interval);
    }
  }

  // Renews `due`: one call per backend batch, one per primitive renewing alone. Returns the
  // leases whose renewal went unanswered.
  std::vector<LeaseState*> renew(const std::vector<Due>& due) {
    std::vector<LeaseState*> unanswered;
    if (due.empty()) return unanswered;
    std::map<const void*, RoundCall> calls;  // by IRenewalBatch, or by Watchdog renewing alone
    for (const Due& each : due) {
      IRenewalBatch* batch = each.owner->batch();
      calls[batch != nullptr ? static_cast<const void*>(batch) : each.owner.get()].leases.push_back(each);
    }
    const Clock::time_point sentAt = clock_->now();
    for (auto& [id, call] : calls) {
      try {
        call.results = send(call.leases);
      } catch (const std::exception& error) {
        call.failure = error.what();
      }
      call.results.resize(call.leases.size(), ExtendResult{false, true, {}});  // a call that threw settled none
    }
    for (auto& [id, call] : calls) {
      judgeByOwner(call, sentAt);
      for (std::size_t i = 0; i < call.leases.size(); ++i) {
        if (call.results[i].unknown) unanswered.push_back(call.leases[i].lease.get());
      }
    }
    return unanswered;
  }

  // One call for `leases`: all of one primitive (its renewer), or the backend's batch of every kind.
  static std::vector<ExtendResult> send(const std::vector<Due>& leases) {
    Watchdog& first = *leases.front().owner;
    if (first.batch() == nullptr) {
      std::vector<std::shared_ptr<LeaseState>> batch;
      batch.reserve(leases.size());
      for (const Due& each : leases) batch.push_back(each.lease);
      return first.renewer().renewAll(batch, first.lease());
    }
    std::vector<Renewal> renewals;
    renewals.reserve(leases.size());
    for (const Due& each : leases) {
      const LeaseState& lease = *each.lease;
      renewals.push_back(Renewal{renewalKindOf(lease.kind), lease.key, lease.token, each.owner->lease(), lease.condition,
                                 lease.ttl});
    }
    return first.batch()->renewBatch(renewals);
  }

  // Hands each primitive the outcomes of its own leases in `call`.
  static void judgeByOwner(const RoundCall& call, Clock::time_point sentAt) {
    std::map<Watchdog*, std::pair<std::vector<std::shared_ptr<LeaseState>>, std::vector<ExtendResult>>> byOwner;
    for (std::size_t i = 0; i < call.leases.size(); ++i) {
      auto& mine = byOwner[call.leases[i].owner.get()];
      mine.first.push_back(call.leases[i].lease);
      mine.second.push_back(call.results[i]);
    }
    for (auto& [owner, mine] : byOwner) owner->judgeRound(mine.first, mine.second, sentAt, call.failure);
  }

  const std::shared_ptr<Clock> clock_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable settled_;  // a round ended (remove() waits for it), or a re-wake was seen
  bool rewake_ = false;              // guarded by mutex_; resumeCare() waits for the thread to see it
  std::vector<Kept> leases_;         // guarded by mutex_
  bool stopping_ = false;            // guarded by mutex_
  bool running_ = false;             // guarded by mutex_; the thread has started
  bool renewing_ = false;            // guarded by mutex_; a round is renewing outside the mutex
  std::thread thread_;               // started under mutex_
};

WatchdogThread::WatchdogThread(std::shared_ptr<Clock> clock) : core_(std::make_shared<Core>(std::move(clock))) {}

WatchdogThread::~WatchdogThread() { core_->stop(); }

void WatchdogThread::add(const std::shared_ptr<Watchdog>& owner, std::shared_ptr<LeaseState> lease) {
  core_->add(owner, std::move(lease));
}

void WatchdogThread::remove(const Watchdog& owner) { core_->remove(owner); }

void WatchdogThread::resumeCare() { core_->resumeCare(); }

const std::shared_ptr<Clock>& WatchdogThread::clock() const noexcept { return core_->clock(); }

}  // namespace dlock::detail
