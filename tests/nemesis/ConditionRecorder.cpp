// SPDX-License-Identifier: Apache-2.0
#include "ConditionRecorder.h"

#include <cstdint>

#include <dlock/LockError.h>

#include "LeaseRecorder.h"

namespace dlock::nemesis {
namespace {

using std::chrono::milliseconds;

std::uint32_t& lastMoved() {
  static thread_local std::uint32_t moved = 0;
  return moved;
}

// A waiter's hand-offs (fair key) or signal messages (exclusive key), each heard one told to the
// recorder before the waiter sees it.
class HeardWatch final : public IGrantWatch {
 public:
  HeardWatch(std::unique_ptr<IGrantWatch> inner, std::function<void(const Grant&)> heard)
      : inner_(std::move(inner)), heard_(std::move(heard)) {}

  Grant waitForGrant(milliseconds timeout) override {
    Grant grant = inner_->waitForGrant(timeout);
    if (grant.kind == Grant::Kind::Granted) heard_(grant);
    return grant;
  }

 private:
  std::unique_ptr<IGrantWatch> inner_;
  std::function<void(const Grant&)> heard_;
};

}  // namespace

ConditionRecorder::ConditionRecorder(std::shared_ptr<IOperator> lock, std::shared_ptr<IConditionOperator> conditions,
                                     Sink sink)
    : lock_(std::move(lock)), conditions_(std::move(conditions)), sink_(std::move(sink)) {}

void ConditionRecorder::record(const char* op, std::string_view key, std::string_view token, std::string value,
                               std::int64_t timeNs, std::uint64_t fence) const {
  Op record;
  record.kind = Kind::Info;
  record.op = op;
  record.key = std::string(key);
  record.message = std::string(token);
  record.value = std::move(value);
  record.timeNs = timeNs;
  record.token = fence;
  sink_(std::move(record));
}

void ConditionRecorder::taken(std::string_view key, std::string_view token, std::uint64_t fence, std::int64_t sentNs) {
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    owners_[{std::string(key), fence}] = std::string(token);
  }
  record("taken", key, token, std::to_string(monotonicNs()), sentNs, fence);
}

void ConditionRecorder::confirmClaim(std::string_view key, std::string_view token, std::int64_t sentNs) {
  std::uint64_t fence = 0;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    const auto found = claims_.find({std::string(key), std::string(token)});
    if (found == claims_.end()) return;
    fence = found->second;
    claims_.erase(found);
  }
  taken(key, token, fence, sentNs);
}

AcquireResult ConditionRecorder::lock(std::string_view key, std::string_view token, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  AcquireResult result = lock_->lock(key, token, ttl);
  if (result.acquired) taken(key, token, result.fencingToken, sent);
  return result;
}

bool ConditionRecorder::extend(std::string_view key, std::string_view token, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  const bool extended = lock_->extend(key, token, ttl);
  if (extended) confirmClaim(key, token, sent);
  return extended;
}

std::vector<ExtendResult> ConditionRecorder::extendAll(const std::vector<LeaseRef>& leases, milliseconds ttl) {
  const std::int64_t sent = monotonicNs();
  std::vector<ExtendResult> results = lock_->extendAll(leases, ttl);
  for (std::size_t i = 0; i < results.size() && i < leases.size(); ++i) {
    if (results[i].extended) confirmClaim(leases[i].key, leases[i].token, sent);
  }
  return results;
}

IFairOperator& ConditionRecorder::queue() const { return fairQueueOf(*lock_); }

std::string ConditionRecorder::fairUnsupported() const { return fairUnsupportedBy(*lock_); }

FairAcquireResult ConditionRecorder::fairLock(std::string_view key, std::string_view token, milliseconds ttl,
                                              milliseconds waiterLease) {
  const std::int64_t sent = monotonicNs();
  FairAcquireResult result = queue().fairLock(key, token, ttl, waiterLease);
  if (result.acquired) {
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      claims_.erase({std::string(key), std::string(token)});
    }
    taken(key, token, result.fencingToken, sent);
  }
  return result;
}

ReleaseResult ConditionRecorder::fairUnlock(std::string_view key, std::string_view token) {
  return queue().fairUnlock(key, token);
}

bool ConditionRecorder::leaveQueue(std::string_view key, std::string_view token, milliseconds ttl) {
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    claims_.erase({std::string(key), std::string(token)});
  }
  return queue().leaveQueue(key, token, ttl);
}

std::unique_ptr<IGrantWatch> ConditionRecorder::watchGrants(std::string_view key, std::string_view token) {
  return std::make_unique<HeardWatch>(queue().watchGrants(key, token),
                                      [this, key = std::string(key), token = std::string(token)](const Grant& grant) {
                                        heardGrant(key, token, grant.fencingToken);
                                      });
}

LeaseInfo ConditionRecorder::inspect(std::string_view key) {
  auto* inspector = dynamic_cast<ILeaseInspector*>(lock_.get());
  if (inspector == nullptr) throw ConfigError("dlock: " + lock_->describe() + " cannot inspect leases");
  return inspector->inspect(key);
}

void ConditionRecorder::heardGrant(const std::string& key, const std::string& token, std::uint64_t fencingToken) {
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    claims_[{key, token}] = fencingToken;
  }
  woken({key, token}, "signalled");  // a hand-off to a waiter on the condition follows its signal
}

void ConditionRecorder::heardSignal(const std::string& key, const std::string& token) { woken({key, token}, "signalled"); }

void ConditionRecorder::woken(const Id& id, const char* why) {
  std::string name;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    const auto found = places_.find(id);
    if (found == places_.end()) return;
    name = found->second.name;
    places_.erase(found);
  }
  record("woken", id.first, id.second, name + " " + why, monotonicNs());
}

void ConditionRecorder::wokenIfLapsed(const Id& id) {
  bool lapsed = false;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    const auto found = places_.find(id);
    lapsed = found != places_.end() && monotonicNs() >= found->second.untilNs;
  }
  if (lapsed) woken(id, "lapsed");
}

void ConditionRecorder::closePlace(const std::string& key, const std::string& owner, const std::string& name) {
  bool lapsed = false;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    const auto found = places_.find({key, owner});
    if (found == places_.end() || found->second.name != name) return;
    lapsed = monotonicNs() >= found->second.untilNs;
  }
  woken({key, owner}, lapsed ? "lapsed" : "returned");
}

std::string ConditionRecorder::ownerOf(const std::string& key, std::uint64_t fencingToken) const {
  const std::lock_guard<std::mutex> guard(mutex_);
  const auto found = owners_.find({key, fencingToken});
  return found == owners_.end() ? std::string() : found->second;
}

std::uint32_t ConditionRecorder::lastSignalMoved() { return lastMoved(); }

AwaitResult ConditionRecorder::doAwait(std::string_view key, std::string_view name, std::string_view token,
                                       ConditionLock lock, std::uint64_t fencingToken, milliseconds ttl,
                                       milliseconds waiterLease) {
  const std::int64_t sent = monotonicNs();
  const AwaitResult result = conditions_->await(key, name, token, lock, fencingToken, ttl, waiterLease);
  if (result.awaiting) {
    {
      const std::lock_guard<std::mutex> guard(mutex_);
      const std::int64_t until = sent + std::chrono::duration_cast<std::chrono::nanoseconds>(waiterLease).count();
      places_[{std::string(key), std::string(token)}] = Place{std::string(name), until};
      evidenceEnds_[{std::string(key), std::string(token)}] = until;
    }
    record("joined", key, token, std::string(name), monotonicNs());
  }
  return result;
}

SignalResult ConditionRecorder::doSignal(std::string_view key, std::string_view name, std::string_view token,
                                         ConditionLock lock, bool all) {
  lastMoved() = 0;
  const SignalResult result = all ? conditions_->signalAll(key, name, token, lock) : conditions_->signal(key, name, token, lock);
  lastMoved() = result.moved;
  return result;
}

std::vector<ExtendResult> ConditionRecorder::doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                                             milliseconds waiterLease) {
  const std::int64_t sent = monotonicNs();
  std::vector<ExtendResult> results;
  try {
    results = conditions_->renewAwaitAll(waiters, waiterLease);
  } catch (const LockError&) {  // unknown: only the place's waiter lease passing ends it
    for (const ConditionWaiter& waiter : waiters) wokenIfLapsed({std::string(waiter.key), std::string(waiter.token)});
    throw;
  }
  for (std::size_t i = 0; i < results.size() && i < waiters.size(); ++i) {
    const Id id{std::string(waiters[i].key), std::string(waiters[i].token)};
    if (results[i].extended) {
      const std::lock_guard<std::mutex> guard(mutex_);
      const auto found = places_.find(id);
      const std::int64_t until = sent + std::chrono::duration_cast<std::chrono::nanoseconds>(waiterLease).count();
      if (found != places_.end()) found->second.untilNs = until;
      evidenceEnds_[id] = until;
    } else if (!results[i].unknown) {
      woken(id, "signalled");  // signalled, or dropped once its lease ended: the waiter re-takes
      goneAnswered(id, std::string(waiters[i].name));
    } else {
      wokenIfLapsed(id);
    }
  }
  return results;
}

bool ConditionRecorder::doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                                         milliseconds ttl) {
  const Id id{std::string(key), std::string(token)};
  woken(id, "timeout");  // before the leave: a signal answered earlier came first
  const bool waiting = conditions_->leaveCondition(key, name, token, ttl);
  if (!waiting) goneAnswered(id, std::string(name));
  return waiting;
}

void ConditionRecorder::goneAnswered(const Id& id, const std::string& name) {
  // "Not on the condition" is a move only while the place still lived: its evidence (the last
  // confirmed send plus the waiter lease) ends no later than the server's place. Answered after
  // that, the place may have run out instead (a spurious return, Condition.h): the await's
  // "signalled" then proves no move.
  std::int64_t until = INT64_MAX;
  {
    const std::lock_guard<std::mutex> guard(mutex_);
    const auto found = evidenceEnds_.find(id);
    if (found != evidenceEnds_.end()) until = found->second;
  }
  const std::int64_t now = monotonicNs();
  if (now >= until) record("leave-undecided", id.first, id.second, name, now);
}

std::unique_ptr<IGrantWatch> ConditionRecorder::doWatchSignals(std::string_view key, std::string_view token) {
  return std::make_unique<HeardWatch>(conditions_->watchSignals(key, token),
                                      [this, key = std::string(key), token = std::string(token)](const Grant&) {
                                        heardSignal(key, token);
                                      });
}

ConditionInfo ConditionRecorder::doInspectCondition(std::string_view key, std::string_view name) {
  return conditions_->inspectCondition(key, name);
}

}  // namespace dlock::nemesis
