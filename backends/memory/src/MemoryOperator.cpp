// SPDX-License-Identifier: Apache-2.0
#include "dlock/memory/MemoryOperator.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <list>
#include <map>
#include <optional>
#include <mutex>
#include <thread>

#include "dlock/LockError.h"
#include "dlock/detail/Fork.h"
#include "dlock/Validation.h"
#include "MemoryCondition.h"
#include "MemoryElection.h"
#include "MemoryFairQueue.h"
#include "MemoryReadWrite.h"
#include "MemorySemaphore.h"
#include "dlock/detail/Wakeup.h"

namespace dlock {

struct MemoryOperator::State {
  // The key's latest releases, each until its lease would have ended: a retried release whose
  // first try ran is answered from here, as the Redis release answers from its record. A retry
  // comes right after its release, so a few per key are enough; an older one is forgotten, and
  // its retry reports the lease lost (a false alarm, never a false release). Fixed slots whose
  // strings keep their capacity: a release allocates nothing once the key has been released a
  // few times, and records do not pile up under long leases.
  class RecentReleases {
   public:
    void add(std::string_view token, Clock::time_point until) {
      Record& record = records_[next_];
      record.token.assign(token);
      record.until = until;
      next_ = (next_ + 1) % records_.size();
    }
    [[nodiscard]] bool contains(std::string_view token, Clock::time_point now) const {
      return std::any_of(records_.begin(), records_.end(),
                         [&](const Record& record) { return record.until > now && record.token == token; });
    }
    // A token that tries the key again: its earlier release is no later hold's.
    void forget(std::string_view token) {
      for (Record& record : records_) {
        if (record.token == token) record.until = Clock::time_point{};
      }
    }
    void clear() {
      for (Record& record : records_) record.until = Clock::time_point{};
    }

   private:
    struct Record {
      std::string token;
      Clock::time_point until{};
    };
    std::array<Record, 4> records_{};
    std::size_t next_ = 0;
  };

  struct Entry {
    std::string token;
    Clock::time_point expiresAt;
    std::string owner;  // the owner label, when the holder recorded one
    std::chrono::system_clock::time_point ownerSince{};
  };
  struct KeyState {
    // A live IReleaseWatch, and whether a release woke it since it last returned.
    struct Watcher {
      std::uint64_t id = 0;
      bool woken = false;
      std::function<void()> heard;  // IReleaseWatch::notifyOnRelease's: told as it is woken
    };
    std::uint64_t fence = 0;          // last fencing token handed out
    std::list<Watcher> watchers;      // this key's, the longest registered first
    std::uint64_t lastWatcher = 0;    // the id of the newest
    RecentReleases releasedBy;
    detail::MemoryFairQueue fair;     // the fair lock's waiters (MemoryFairOperator.cpp)

    // The lease, expired or not; nullptr when nobody holds the key.
    [[nodiscard]] Entry* lease() { return held_ ? &lease_ : nullptr; }
    // A lease for `token` until `expiresAt`, written over the last one: its strings keep their
    // buffers, so an uncontended lock+unlock allocates nothing here once the key has been held.
    Entry& hold(std::string_view token, Clock::time_point expiresAt) {
      lease_.token.assign(token);
      lease_.expiresAt = expiresAt;
      lease_.owner.clear();
      lease_.ownerSince = {};
      held_ = true;
      return lease_;
    }
    void drop() { held_ = false; }

    // As the Redis release wakes the longest-registered waiting process: wakes the first watcher
    // not woken yet, which keeps its place (a woken waiter that loses the key to a newcomer is
    // woken first again; its watch ends when it gets the key); false when every one is woken
    // already, or none waits.
    bool wakeOne() {
      const auto it = std::find_if(watchers.begin(), watchers.end(), [](const Watcher& w) { return !w.woken; });
      if (it == watchers.end()) return false;
      it->woken = true;
      if (it->heard) it->heard();
      return true;
    }
    Watcher* watcher(std::uint64_t id) {
      const auto it = std::find_if(watchers.begin(), watchers.end(), [&](const Watcher& w) { return w.id == id; });
      return it == watchers.end() ? nullptr : &*it;
    }

   private:
    Entry lease_;
    bool held_ = false;
  };

  explicit State(std::shared_ptr<Clock> c)
      : clock(std::move(c)),
        readWrite(std::make_shared<detail::MemoryReadWrite>(clock)),
        semaphores(std::make_shared<detail::MemorySemaphores>(clock)) {}

  const std::shared_ptr<Clock> clock;
  const std::shared_ptr<detail::MemoryReadWrite> readWrite;    // read-write locks, with their own mutex
  const std::shared_ptr<detail::MemorySemaphores> semaphores;  // semaphores, with their own mutex
  mutable std::mutex mutex;
  std::condition_variable released;                       // notified on every release
  std::map<std::string, KeyState, std::less<>> keys;      // guarded by mutex
  detail::MemoryConditions conditions;                    // guarded by mutex
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> renewalBatches{0};  // renewBatch calls
  std::atomic<unsigned> failuresLeft{0};
  std::atomic<std::int64_t> latencyMillis{0};

  // The key's live lease, dropping it if it has expired.
  Entry* liveLease(KeyState& state, Clock::time_point now) {
    Entry* lease = state.lease();
    if (lease != nullptr && now >= lease->expiresAt) state.drop();
    return state.lease();
  }

  KeyState* find(std::string_view key) {
    const auto it = keys.find(key);
    return it == keys.end() ? nullptr : &it->second;
  }

  // The release both unlocks share: when `token` holds `key`, ends its lease, records the release
  // and returns the key's state; else nullptr, with `result` saying whether it released it earlier.
  KeyState* release(std::string_view key, std::string_view token, Clock::time_point now, ReleaseResult& result) {
    KeyState* entry = find(key);
    if (entry == nullptr) return nullptr;
    const Entry* holder = ownedLease(*entry, token, now);
    if (holder == nullptr) {
      result.released = result.releasedEarlier = entry->releasedBy.contains(token, now);
      return nullptr;
    }
    entry->releasedBy.add(token, holder->expiresAt);
    entry->drop();
    result.notified = entry->wakeOne() ? 1 : 0;
    result.released = true;
    return entry;
  }

  // The live lease of `key` if `token` holds it, else nullptr.
  Entry* ownedLease(std::string_view key, std::string_view token, Clock::time_point now) {
    KeyState* state = find(key);
    return state == nullptr ? nullptr : ownedLease(*state, token, now);
  }
  Entry* ownedLease(KeyState& state, std::string_view token, Clock::time_point now) {
    Entry* holder = liveLease(state, now);
    return holder != nullptr && holder->token == token ? holder : nullptr;
  }
};

namespace {

class MemoryReleaseWatch final : public IReleaseWatch {
 public:
  MemoryReleaseWatch(std::shared_ptr<MemoryOperator::State> state, std::string key)
      : state_(std::move(state)), key_(std::move(key)) {
    std::lock_guard<std::mutex> guard(state_->mutex);
    auto it = state_->keys.find(key_);
    if (it == state_->keys.end()) it = state_->keys.emplace(key_, MemoryOperator::State::KeyState{}).first;
    it->second.watchers.push_back({++it->second.lastWatcher, false, {}});
    id_ = it->second.lastWatcher;
  }
  MemoryReleaseWatch(const MemoryReleaseWatch&) = delete;
  MemoryReleaseWatch& operator=(const MemoryReleaseWatch&) = delete;
  ~MemoryReleaseWatch() override {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (auto* key = state_->find(key_)) key->watchers.remove_if([&](const auto& w) { return w.id == id_; });
  }

  // Woken by a release that picked this watcher (since it was made or last returned).
  bool waitForRelease(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> guard(state_->mutex);
    const bool released = detail::Wakeup::waitFor(state_->released, guard, timeout, [&] { return self().woken; });
    self().woken = false;
    return released;
  }

  // Told under the state's mutex, by the release that wakes this watcher.
  bool notifyOnRelease(std::function<void()> heard) override {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (self().heard || !heard) return false;
    self().heard = std::move(heard);
    return true;
  }

 private:
  MemoryOperator::State::KeyState::Watcher& self() { return *state_->find(key_)->watcher(id_); }

  const std::shared_ptr<MemoryOperator::State> state_;
  const std::string key_;
  std::uint64_t id_ = 0;
};

}  // namespace

// A forked child's memory operator is a new, empty one (as a child's Redis operators reconnect):
// the parent's state is abandoned untouched, its mutex possibly held by a thread the child lacks.
struct MemoryOperator::Holder {
  explicit Holder(const std::shared_ptr<Clock>& clock)
      : state([clock] { return std::make_shared<State>(clock); }),
        elections([clock] { return std::make_shared<detail::MemoryElections>(clock); }) {}
  detail::ForkLocal<State> state;
  detail::ForkLocal<detail::MemoryElections> elections;
};

MemoryOperator::MemoryOperator(std::shared_ptr<Clock> clock)
    : holder_(std::make_shared<Holder>(clock ? std::move(clock) : SteadyClock::instance())) {}

MemoryOperator::State& MemoryOperator::state() const { return *holder_->state; }

detail::MemoryReadWrite& MemoryOperator::readWrite() const { return *state().readWrite; }

detail::MemorySemaphores& MemoryOperator::semaphores() const { return *state().semaphores; }

detail::MemoryElections& MemoryOperator::elections() const { return *holder_->elections; }

MemoryOperator::~MemoryOperator() = default;

MemoryOperator::State& MemoryOperator::beforeCall() {
  State& state = this->state();
  state.calls.fetch_add(1, std::memory_order_relaxed);
  const auto latency = state.latencyMillis.load(std::memory_order_relaxed);
  if (latency > 0) std::this_thread::sleep_for(std::chrono::milliseconds(latency));
  unsigned left = state.failuresLeft.load(std::memory_order_relaxed);
  while (left > 0) {
    if (state.failuresLeft.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      throw ConnectionError("dlock: memory://: injected connection failure");
    }
  }
  return state;
}

AcquireResult MemoryOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  return acquire(key, token, ttl, nullptr);
}

AcquireResult MemoryOperator::lockRecordingOwner(std::string_view key, std::string_view token,
                                                 std::chrono::milliseconds ttl, std::string_view label) {
  detail::checkOwnerLabel(label, "lock");
  return acquire(key, token, ttl, &label);
}

AcquireResult MemoryOperator::acquire(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                                      const std::string_view* label) {
  State& state = beforeCall();
  std::lock_guard<std::mutex> guard(state.mutex);
  const Clock::time_point now = state.clock->now();
  auto it = state.keys.find(key);
  if (it == state.keys.end()) it = state.keys.emplace(std::string(key), State::KeyState{}).first;
  State::KeyState& entry = it->second;
  entry.releasedBy.forget(token);  // an earlier try's release is no later hold's (see Scripts.cpp)
  AcquireResult result;
  if (const State::Entry* holder = state.liveLease(entry, now)) {
    if (holder->token == token) {
      // As the Redis acquire script: the owner's retry (its first reply lost) succeeds again with
      // the fencing token it got, and the lease keeps its expiry.
      result.acquired = true;
      result.fencingToken = entry.fence;
      return result;
    }
    result.holderTtl = std::chrono::ceil<std::chrono::milliseconds>(holder->expiresAt - now);
    return result;
  }
  // As the Redis counter (INCR): it stops at 2^63 - 1, refusing before the key is taken.
  if (entry.fence >= kMaxFencingToken) {
    throw BackendError("dlock: lock " + detail::quoteKey(key) + " on memory://: the fencing counter is at its limit");
  }
  State::Entry& lease = entry.hold(token, now + ttl);
  if (label != nullptr) {
    lease.owner = std::string(*label);
    lease.ownerSince = std::chrono::system_clock::now();
  }
  result.acquired = true;
  result.fencingToken = ++entry.fence;
  return result;
}

ReleaseResult MemoryOperator::unlock(std::string_view key, std::string_view token) {
  State& state = beforeCall();
  ReleaseResult result;
  {
    std::lock_guard<std::mutex> guard(state.mutex);
    const Clock::time_point now = state.clock->now();
    if (state.release(key, token, now, result) == nullptr) return result;
  }
  state.released.notify_all();
  return result;
}

bool MemoryOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  beforeCall();
  std::lock_guard<std::mutex> guard(state().mutex);
  const Clock::time_point now = state().clock->now();
  State::Entry* holder = state().ownedLease(key, token, now);
  if (holder != nullptr) holder->expiresAt = now + ttl;
  return holder != nullptr;
}

std::vector<ExtendResult> MemoryOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  beforeCall();
  std::vector<ExtendResult> results;
  results.reserve(leases.size());
  std::lock_guard<std::mutex> guard(state().mutex);
  const Clock::time_point now = state().clock->now();
  for (const auto& lease : leases) {
    State::Entry* holder = state().ownedLease(lease.key, lease.token, now);
    if (holder != nullptr) holder->expiresAt = now + ttl;
    results.push_back(ExtendResult{holder != nullptr, false, {}});
  }
  return results;
}

std::uint64_t MemoryOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  detail::checkFencingToken(atLeast, "raiseFence");
  beforeCall();
  std::lock_guard<std::mutex> guard(state().mutex);
  auto it = state().keys.find(key);
  if (it == state().keys.end()) it = state().keys.emplace(std::string(key), State::KeyState{}).first;
  it->second.fence = std::max(it->second.fence, atLeast);
  return it->second.fence;
}

std::unique_ptr<IReleaseWatch> MemoryOperator::watch(std::string_view key) {
  return std::make_unique<MemoryReleaseWatch>(holder_->state.shared(), std::string(key));
}

LeaseInfo MemoryOperator::inspect(std::string_view key) {
  beforeCall();
  std::lock_guard<std::mutex> guard(state().mutex);
  LeaseInfo info;
  State::KeyState* entry = state().find(key);
  if (entry == nullptr) return info;
  info.fencingToken = entry->fence;
  const Clock::time_point now = state().clock->now();
  if (const State::Entry* holder = state().liveLease(*entry, now)) {
    info.held = true;
    info.remaining = std::chrono::ceil<std::chrono::milliseconds>(holder->expiresAt - now);
    info.owner = holder->owner;
    info.ownerSince = holder->ownerSince;
  }
  return info;
}

void MemoryOperator::failNextCalls(unsigned count) { state().failuresLeft.store(count, std::memory_order_relaxed); }

void MemoryOperator::setLatency(std::chrono::milliseconds latency) {
  state().latencyMillis.store(latency.count(), std::memory_order_relaxed);
}

void MemoryOperator::forgetLeases() {
  std::lock_guard<std::mutex> guard(state().mutex);
  for (auto& [key, entry] : state().keys) {
    entry.drop();
    entry.releasedBy.clear();
    entry.fair.clearWaiters();
  }
  state().conditions.clear();
  state().readWrite->forget();
  state().semaphores->forget();
}

std::uint64_t MemoryOperator::calls() const noexcept { return state().calls.load(std::memory_order_relaxed); }

std::uint64_t MemoryOperator::renewalBatches() const noexcept {
  return state().renewalBatches.load(std::memory_order_relaxed);
}

std::vector<ExtendResult> MemoryOperator::renewBatch(const std::vector<Renewal>& renewals) {
  state().renewalBatches.fetch_add(1, std::memory_order_relaxed);
  return renewEachKind(*this, renewals);
}

std::size_t MemoryOperator::size() const {
  std::lock_guard<std::mutex> guard(state().mutex);
  const Clock::time_point now = state().clock->now();
  std::size_t live = 0;
  for (auto& [key, entry] : state().keys) {
    if (state().liveLease(entry, now) != nullptr) ++live;
  }
  return live;
}

std::string MemoryOperator::holderOf(std::string_view key) const {
  std::lock_guard<std::mutex> guard(state().mutex);
  State::KeyState* entry = state().find(key);
  if (entry == nullptr) return {};
  const State::Entry* holder = state().liveLease(*entry, state().clock->now());
  return holder == nullptr ? std::string() : holder->token;
}

}  // namespace dlock

// The fair lock (IFairOperator): the same decisions as FairScripts.h, under the operator's mutex.
namespace dlock {
namespace {

std::int64_t clockMillis(Clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
}

// Hands `entry`'s key to its first live waiter (owner with its own ttl, a new fencing token, its
// grant watch told); false when nobody waits. The caller notifies `released`.
bool handOff(MemoryOperator::State::KeyState& entry, Clock::time_point now, std::string_view key) {
  std::optional<detail::MemoryFairQueue::Waiter> heir = entry.fair.takeLive(now);
  if (!heir) return false;
  if (entry.fence >= kMaxFencingToken) {
    throw BackendError("dlock: unlock " + detail::quoteKey(key) + " on memory://: the fencing counter is at its limit");
  }
  // The claim lease, as the script's: the heir's ttl, or the rest of its waiter lease if less.
  const auto claim = std::min(
      heir->ttl, std::max(std::chrono::milliseconds(1), std::chrono::floor<std::chrono::milliseconds>(heir->leaseEnds - now)));
  entry.hold(heir->token, now + claim);
  entry.fair.tell(heir->token, Grant{Grant::Kind::Granted, ++entry.fence, clockMillis(now), claim});
  return true;
}

class MemoryGrantWatch final : public IGrantWatch {
 public:
  MemoryGrantWatch(std::shared_ptr<MemoryOperator::State> state, std::string key, std::string token)
      : state_(std::move(state)), key_(std::move(key)), token_(std::move(token)) {
    std::lock_guard<std::mutex> guard(state_->mutex);
    auto it = state_->keys.find(key_);
    if (it == state_->keys.end()) it = state_->keys.emplace(key_, MemoryOperator::State::KeyState{}).first;
    it->second.fair.watch(token_);
  }
  MemoryGrantWatch(const MemoryGrantWatch&) = delete;
  MemoryGrantWatch& operator=(const MemoryGrantWatch&) = delete;
  ~MemoryGrantWatch() override {
    std::lock_guard<std::mutex> guard(state_->mutex);
    if (auto* key = state_->find(key_)) key->fair.unwatch(token_);
  }

  Grant waitForGrant(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> guard(state_->mutex);
    std::optional<Grant> grant;
    detail::Wakeup::waitFor(state_->released, guard, timeout, [&] {
      auto* key = state_->find(key_);
      grant = key == nullptr ? std::nullopt : key->fair.takeGrant(token_);
      return grant.has_value();
    });
    return grant.value_or(Grant{});
  }

  bool notifyOnGrant(std::function<void()> heard) override {
    std::lock_guard<std::mutex> guard(state_->mutex);
    auto* key = state_->find(key_);
    if (key == nullptr || !heard || notified_) return false;
    key->fair.notify(token_, std::move(heard));
    notified_ = true;
    return true;
  }

 private:
  const std::shared_ptr<MemoryOperator::State> state_;
  const std::string key_;
  const std::string token_;
  bool notified_ = false;
};

}  // namespace

FairAcquireResult MemoryOperator::fairLock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl,
                                           std::chrono::milliseconds waiterLease) {
  beforeCall();
  FairAcquireResult result;
  bool handed = false;
  {
    std::lock_guard<std::mutex> guard(state().mutex);
    const Clock::time_point now = state().clock->now();
    result.backendMillis = clockMillis(now);
    auto it = state().keys.find(key);
    if (it == state().keys.end()) it = state().keys.emplace(std::string(key), State::KeyState{}).first;
    State::KeyState& entry = it->second;
    const State::Entry* holder = state().liveLease(entry, now);
    if (holder != nullptr && holder->token == token) {
      result.acquired = true;
      result.fencingToken = entry.fence;
      result.validity = std::max(std::chrono::milliseconds(1),
                                 std::chrono::floor<std::chrono::milliseconds>(holder->expiresAt - now));
      return result;
    }
    entry.fair.prune(now, token);
    if (holder == nullptr) {
      if (entry.fair.empty() || entry.fair.heads(token)) {
        if (entry.fence >= kMaxFencingToken) {
          throw BackendError("dlock: lock " + detail::quoteKey(key) + " on memory://: the fencing counter is at its limit");
        }
        if (!entry.fair.empty()) entry.fair.popFront();
        entry.hold(token, now + ttl);
        result.acquired = true;
        result.fencingToken = ++entry.fence;
        return result;
      }
      // Free, with another waiter at the head: its holder's lease ran out unreleased.
      handed = handOff(entry, now, key);
      holder = state().liveLease(entry, now);
    }
    if (holder != nullptr) result.holderTtl = std::chrono::ceil<std::chrono::milliseconds>(holder->expiresAt - now);
    // Not ours: a hand-off to `token` heard of later would answer an earlier attempt.
    entry.fair.forgetGrant(token);
    if (waiterLease.count() > 0) result.position = entry.fair.join(token, ttl, now + waiterLease);
  }
  if (handed) state().released.notify_all();
  return result;
}

ReleaseResult MemoryOperator::fairUnlock(std::string_view key, std::string_view token) {
  beforeCall();
  ReleaseResult result;
  {
    std::lock_guard<std::mutex> guard(state().mutex);
    const Clock::time_point now = state().clock->now();
    State::KeyState* entry = state().release(key, token, now, result);
    if (entry == nullptr) return result;
    result.notified = handOff(*entry, now, key) ? 1 : 0;
  }
  state().released.notify_all();
  return result;
}

bool MemoryOperator::leaveQueue(std::string_view key, std::string_view token, std::chrono::milliseconds /*ttl*/) {
  beforeCall();
  bool ours = false;
  {
    std::lock_guard<std::mutex> guard(state().mutex);
    const Clock::time_point now = state().clock->now();
    State::KeyState* entry = state().find(key);
    if (entry == nullptr) return false;
    entry->fair.leave(token);
    const State::Entry* holder = state().liveLease(*entry, now);
    if (holder != nullptr && holder->token != token) return false;
    ours = holder != nullptr;
    entry->drop();
    (void)handOff(*entry, now, key);
    (void)entry->wakeOne();
  }
  state().released.notify_all();
  return ours;
}

std::unique_ptr<IGrantWatch> MemoryOperator::watchGrants(std::string_view key, std::string_view token) {
  return std::make_unique<MemoryGrantWatch>(holder_->state.shared(), std::string(key), std::string(token));
}

std::size_t MemoryOperator::queued(std::string_view key) const {
  std::lock_guard<std::mutex> guard(state().mutex);
  const State::KeyState* entry = state().find(key);
  return entry == nullptr ? 0 : entry->fair.size();
}

}  // namespace dlock

// The conditions (IConditionOperator): the decisions of ConditionScripts.h, under the operator's
// mutex, so an await's release and join are one step as the script's are.
namespace dlock {

using std::chrono::milliseconds;

AwaitResult MemoryOperator::doAwait(std::string_view key, std::string_view name, std::string_view token,
                                    ConditionLock lock, std::uint64_t fencingToken, milliseconds ttl,
                                    milliseconds waiterLease) {
  State& state = beforeCall();
  AwaitResult result;
  {
    std::lock_guard<std::mutex> guard(state.mutex);
    const Clock::time_point now = state.clock->now();
    result.position = state.conditions.placeOf(key, name, token, now);
    if (result.position > 0) {  // a retry whose first try ran
      result.awaiting = result.awaitingEarlier = true;
      return result;
    }
    State::KeyState* held = state.find(key);
    if (lock == ConditionLock::Fair && held != nullptr && held->fence != fencingToken &&
        state.ownedLease(*held, token, now) != nullptr) {  // a later hold: handed on after a signal
      result.awaiting = result.awaitingEarlier = true;
      return result;
    }
    ReleaseResult released;
    State::KeyState* entry = state.release(key, token, now, released);
    if (entry == nullptr) {
      result.awaiting = result.awaitingEarlier = released.releasedEarlier;
      return result;
    }
    if (lock == ConditionLock::Fair) {
      result.notified = handOff(*entry, now, key) ? 1 : 0;
      entry->releasedBy.forget(token);  // the token's next hold is a hand-off: not this release's evidence
    } else {
      result.notified = entry->wakeOne() ? 1 : 0;  // as the exclusive release: one waiting process
    }
    result.awaiting = true;
    result.position = state.conditions.join(key, name, {std::string(token), ttl, now + waiterLease}, now);
  }
  state.released.notify_all();
  return result;
}

SignalResult MemoryOperator::doSignal(std::string_view key, std::string_view name, std::string_view token,
                                      ConditionLock lock, bool all) {
  State& state = beforeCall();
  SignalResult result;
  {
    std::lock_guard<std::mutex> guard(state.mutex);
    const Clock::time_point now = state.clock->now();
    State::KeyState* entry = state.find(key);
    if (entry == nullptr || state.ownedLease(*entry, token, now) == nullptr) return result;
    result.owner = true;
    for (const auto& waiter : state.conditions.take(key, name, all, now)) {
      if (lock == ConditionLock::Fair) {
        (void)entry->fair.join(waiter.token, waiter.ttl, waiter.leaseEnds);
      } else {
        entry->fair.tell(waiter.token, Grant{Grant::Kind::Granted, 0, clockMillis(now), milliseconds(0)});
      }
      ++result.moved;
    }
  }
  if (result.moved > 0) state.released.notify_all();
  return result;
}

std::vector<ExtendResult> MemoryOperator::doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                                          milliseconds waiterLease) {
  State& state = beforeCall();
  std::vector<ExtendResult> results;
  results.reserve(waiters.size());
  std::lock_guard<std::mutex> guard(state.mutex);
  const Clock::time_point now = state.clock->now();
  for (const auto& waiter : waiters) {
    const bool waiting = state.conditions.renew(waiter.key, waiter.name, waiter.token, now + waiterLease, now);
    results.push_back(ExtendResult{waiting, false, {}});
  }
  return results;
}

bool MemoryOperator::doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                                      milliseconds /*ttl*/) {
  State& state = beforeCall();
  std::lock_guard<std::mutex> guard(state.mutex);
  return state.conditions.leave(key, name, token, state.clock->now());
}

std::unique_ptr<IGrantWatch> MemoryOperator::doWatchSignals(std::string_view key, std::string_view token) {
  // A signal is told as a hand-off is, through the key's grant watches (MemoryFairQueue::tell).
  return std::make_unique<MemoryGrantWatch>(holder_->state.shared(), std::string(key), std::string(token));
}

ConditionInfo MemoryOperator::doInspectCondition(std::string_view key, std::string_view name) {
  State& state = beforeCall();
  std::lock_guard<std::mutex> guard(state.mutex);
  const Clock::time_point now = state.clock->now();
  ConditionInfo info;
  for (const auto& waiter : state.conditions.live(key, name, now)) {
    info.waiters.push_back({waiter.token, std::chrono::ceil<milliseconds>(waiter.leaseEnds - now)});
  }
  return info;
}

}  // namespace dlock
