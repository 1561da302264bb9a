// SPDX-License-Identifier: Apache-2.0
#include "MemorySemaphore.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {
namespace {

using std::chrono::milliseconds;

std::int64_t clockMillis(Clock::time_point now) {
  return std::chrono::duration_cast<milliseconds>(now.time_since_epoch()).count();
}

milliseconds left(Clock::time_point ends, Clock::time_point now) {
  return std::max(milliseconds(1), std::chrono::floor<milliseconds>(ends - now));
}

// Notifies the grant watches once the operator's mutex is given back (declared before the guard).
struct NotifyOnExit {
  std::condition_variable& granted;
  bool any = false;
  NotifyOnExit(const NotifyOnExit&) = delete;
  NotifyOnExit& operator=(const NotifyOnExit&) = delete;
  ~NotifyOnExit() {
    if (any) granted.notify_all();
  }
};

}  // namespace

struct MemorySemaphores::Semaphore {
  enum class Kind : std::uint8_t { Holding, Waiting, Released, Left };
  struct Entry {
    Kind kind = Kind::Holding;
    std::uint32_t permits = 0;
    std::uint64_t fence = 0;  // holding
    milliseconds lease{0};    // waiting: the lease it is admitted for
    Clock::time_point ends{};
  };

  std::uint32_t capacity = 0;  // 0: none stored yet
  std::uint32_t used = 0;
  std::uint64_t fence = 0;
  std::map<std::string, Entry, std::less<>> tokens;
  std::deque<std::string> queue;                                     // waiting tokens, head first
  std::map<std::string, std::optional<Grant>, std::less<>> grants;  // unheard grants of watched tokens

  Entry* entry(std::string_view token) {
    const auto it = tokens.find(token);
    return it == tokens.end() ? nullptr : &it->second;
  }

  // Drops every state due by `now`, but the waiting place of `keep` (it renews it in this call).
  void reclaim(Clock::time_point now, std::string_view keep) {
    for (auto it = tokens.begin(); it != tokens.end();) {
      const Entry& due = it->second;
      if (due.ends > now || (due.kind == Kind::Waiting && it->first == keep)) {
        ++it;
        continue;
      }
      if (due.kind == Kind::Holding) used -= due.permits;
      if (due.kind == Kind::Waiting) queue.erase(std::find(queue.begin(), queue.end(), it->first));
      it = tokens.erase(it);
    }
  }

  std::uint64_t nextFence(std::string_view name) {
    if (fence >= kMaxFencingToken) {
      throw BackendError("dlock: semaphore " + quoteKey(name) + " on memory://: the fencing counter is at its limit");
    }
    return ++fence;
  }

  // Time until the earliest deadline; zero when none.
  [[nodiscard]] milliseconds nextExpiry(Clock::time_point now) const {
    std::optional<Clock::time_point> first;
    for (const auto& [token, each] : tokens) {
      if (!first || each.ends < *first) first = each.ends;
    }
    return first ? left(*first, now) : milliseconds(0);
  }

  void tell(const std::string& token, const Grant& grant) {
    const auto it = grants.find(token);
    if (it != grants.end()) it->second = grant;
  }
};

class MemorySemaphores::Watch final : public IGrantWatch {
 public:
  Watch(std::shared_ptr<MemorySemaphores> owner, std::string name, std::string token)
      : owner_(std::move(owner)), name_(std::move(name)), token_(std::move(token)) {
    std::lock_guard<std::mutex> guard(owner_->mutex_);
    owner_->find(name_).grants[token_].reset();
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;
  ~Watch() override {
    std::lock_guard<std::mutex> guard(owner_->mutex_);
    owner_->find(name_).grants.erase(token_);
  }

  Grant waitForGrant(milliseconds timeout) override {
    std::unique_lock<std::mutex> guard(owner_->mutex_);
    std::optional<Grant> grant;
    Wakeup::waitFor(owner_->granted_, guard, timeout, [&] {
      auto& slot = owner_->find(name_).grants[token_];
      grant = std::exchange(slot, std::nullopt);
      return grant.has_value();
    });
    return grant.value_or(Grant{});
  }

 private:
  const std::shared_ptr<MemorySemaphores> owner_;
  const std::string name_;
  const std::string token_;
};

MemorySemaphores::MemorySemaphores(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

MemorySemaphores::~MemorySemaphores() = default;

MemorySemaphores::Semaphore& MemorySemaphores::find(std::string_view name) {
  auto it = semaphores_.find(name);
  if (it == semaphores_.end()) it = semaphores_.emplace(std::string(name), std::make_unique<Semaphore>()).first;
  return *it->second;
}

// Every writing call: under the mutex, on the clock's now, after reclaiming what is due (but the
// place of `keep`); the watches are notified after the mutex is given back when `decide` admitted.
template <class Decide>
auto MemorySemaphores::decide(std::string_view name, std::string_view keep, Decide&& decide) {
  NotifyOnExit notify{granted_};
  std::lock_guard<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  Semaphore& semaphore = find(name);
  semaphore.reclaim(now, keep);
  return decide(semaphore, now, notify.any);  // `told`: some watch has a grant to hear
}

std::uint32_t MemorySemaphores::admit(Semaphore& semaphore, Clock::time_point now, std::string_view caller,
                                      milliseconds callerLease) {
  std::uint32_t admitted = 0;
  while (semaphore.capacity > 0 && !semaphore.queue.empty()) {
    const std::string head = semaphore.queue.front();
    Semaphore::Entry& waiter = semaphore.tokens.at(head);
    if (semaphore.used + waiter.permits > semaphore.capacity) break;  // strict FIFO
    const bool isCaller = head == caller;
    const milliseconds claim = isCaller ? callerLease : std::min(waiter.lease, left(waiter.ends, now));
    waiter.kind = Semaphore::Kind::Holding;
    waiter.fence = semaphore.nextFence(head);
    waiter.ends = now + claim;
    semaphore.used += waiter.permits;
    semaphore.queue.pop_front();
    if (!isCaller) semaphore.tell(head, Grant{Grant::Kind::Granted, waiter.fence, clockMillis(now), claim});
    ++admitted;
  }
  return admitted;
}

SemaphoreAcquireResult MemorySemaphores::acquire(std::string_view name, std::string_view token, std::uint32_t permits,
                                                 std::uint32_t capacity, milliseconds lease, milliseconds waiterLease) {
  return decide(name, token, [&](Semaphore& semaphore, Clock::time_point now, bool& told) {
    told = admit(semaphore, now, token, lease) > 0;
    SemaphoreAcquireResult result;
    result.backendMillis = clockMillis(now);
    Semaphore::Entry* mine = semaphore.entry(token);
    if (mine != nullptr && mine->kind == Semaphore::Kind::Holding) {
      result.acquired = true;
      result.fencingToken = mine->fence;
      result.validity = left(mine->ends, now);
      return result;
    }
    // Not acquired: a grant to `token` heard later would answer an earlier attempt.
    if (const auto it = semaphore.grants.find(token); it != semaphore.grants.end()) it->second.reset();
    if (mine != nullptr && mine->kind != Semaphore::Kind::Waiting) return result;  // released or left: refused
    if (semaphore.capacity == 0) semaphore.capacity = capacity;
    if (semaphore.capacity != capacity) throwCapacityMismatch(name, "memory://", semaphore.capacity, capacity);
    if (mine == nullptr) {
      if (semaphore.queue.empty() && semaphore.used + permits <= semaphore.capacity) {
        const std::uint64_t fence = semaphore.nextFence(name);
        semaphore.tokens[std::string(token)] =
            Semaphore::Entry{Semaphore::Kind::Holding, permits, fence, {}, now + lease};
        semaphore.used += permits;
        result.acquired = true;
        result.fencingToken = fence;
        return result;
      }
      if (waiterLease.count() > 0) {
        semaphore.tokens[std::string(token)] =
            Semaphore::Entry{Semaphore::Kind::Waiting, permits, 0, lease, now + waiterLease};
        semaphore.queue.emplace_back(token);
        result.position = static_cast<std::uint32_t>(semaphore.queue.size());
      }
    } else {
      if (waiterLease.count() > 0) mine->ends = now + waiterLease;
      const auto at = std::find(semaphore.queue.begin(), semaphore.queue.end(), token);
      result.position = static_cast<std::uint32_t>(at - semaphore.queue.begin()) + 1;
    }
    result.nextExpiry = semaphore.nextExpiry(now);
    return result;
  });
}

ReleaseResult MemorySemaphores::release(std::string_view name, std::string_view token) {
  return decide(name, {}, [&](Semaphore& semaphore, Clock::time_point now, bool& told) {
    ReleaseResult result;
    Semaphore::Entry* mine = semaphore.entry(token);
    if (mine != nullptr && mine->kind == Semaphore::Kind::Holding) {
      semaphore.used -= mine->permits;
      *mine = Semaphore::Entry{Semaphore::Kind::Released, 0, 0, {}, now + kRecordLife};
      result.released = true;
    } else {
      result.released = result.releasedEarlier = mine != nullptr && mine->kind == Semaphore::Kind::Released;
    }
    const std::uint32_t admitted = admit(semaphore, now, {}, {});
    told = admitted > 0;
    if (result.released && !result.releasedEarlier) result.notified = admitted;
    return result;
  });
}

bool MemorySemaphores::extend(std::string_view name, std::string_view token, milliseconds lease) {
  return decide(name, {}, [&](Semaphore& semaphore, Clock::time_point now, bool& told) {
    told = admit(semaphore, now, {}, {}) > 0;
    Semaphore::Entry* mine = semaphore.entry(token);
    if (mine == nullptr || mine->kind != Semaphore::Kind::Holding) return false;
    mine->ends = now + lease;
    return true;
  });
}

bool MemorySemaphores::leave(std::string_view name, std::string_view token) {
  return decide(name, {}, [&](Semaphore& semaphore, Clock::time_point now, bool& told) {
    Semaphore::Entry* mine = semaphore.entry(token);
    bool released = false;
    if (mine != nullptr && mine->kind == Semaphore::Kind::Waiting) {
      semaphore.queue.erase(std::find(semaphore.queue.begin(), semaphore.queue.end(), token));
    } else if (mine != nullptr && mine->kind == Semaphore::Kind::Holding) {
      semaphore.used -= mine->permits;
      released = true;
    }
    if (mine == nullptr) mine = &semaphore.tokens[std::string(token)];
    if (mine->kind != Semaphore::Kind::Released && mine->kind != Semaphore::Kind::Left) {
      *mine = Semaphore::Entry{Semaphore::Kind::Left, 0, 0, {}, now + kRecordLife};
    }
    told = admit(semaphore, now, {}, {}) > 0;
    return released;
  });
}

std::uint32_t MemorySemaphores::resize(std::string_view name, std::uint32_t capacity) {
  return decide(name, {}, [&](Semaphore& semaphore, Clock::time_point now, bool& told) {
    semaphore.capacity = capacity;
    const std::uint32_t admitted = admit(semaphore, now, {}, {});
    told = admitted > 0;
    return admitted;
  });
}

SemaphoreInfo MemorySemaphores::inspect(std::string_view name) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  SemaphoreInfo info;
  const auto it = semaphores_.find(name);
  if (it == semaphores_.end()) return info;
  const Semaphore& semaphore = *it->second;
  info.capacity = semaphore.capacity;
  std::vector<std::pair<Clock::time_point, SemaphoreInfo::Holder>> holders;
  for (const auto& [token, each] : semaphore.tokens) {
    if (each.kind != Semaphore::Kind::Holding || each.ends <= now) continue;
    holders.emplace_back(each.ends, SemaphoreInfo::Holder{token, each.permits, left(each.ends, now), each.fence});
    info.inUse += each.permits;
  }
  std::sort(holders.begin(), holders.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [ends, holder] : holders) info.holders.push_back(std::move(holder));
  for (const std::string& token : semaphore.queue) {
    const Semaphore::Entry& waiter = semaphore.tokens.at(token);
    if (waiter.ends > now) info.waiters.push_back(SemaphoreInfo::Waiter{token, waiter.permits});
  }
  return info;
}

std::unique_ptr<IGrantWatch> MemorySemaphores::watch(std::string_view name, std::string_view token) {
  return std::make_unique<Watch>(shared_from_this(), std::string(name), std::string(token));
}

void MemorySemaphores::forget() {
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto& [name, semaphore] : semaphores_) {
    auto grants = std::move(semaphore->grants);
    *semaphore = Semaphore{};
    semaphore->grants = std::move(grants);
  }
}

}  // namespace dlock::detail

// MemoryOperator's semaphore calls: counted and faulted as its other calls, then decided above.
namespace dlock {

SemaphoreAcquireResult MemoryOperator::doAcquirePermits(std::string_view name, std::string_view token,
                                                        std::uint32_t permits, std::uint32_t capacity,
                                                        std::chrono::milliseconds lease,
                                                        std::chrono::milliseconds waiterLease) {
  beforeCall();
  return semaphores().acquire(name, token, permits, capacity, lease, waiterLease);
}

ReleaseResult MemoryOperator::doReleasePermits(std::string_view name, std::string_view token) {
  beforeCall();
  return semaphores().release(name, token);
}

bool MemoryOperator::doExtendPermits(std::string_view name, std::string_view token, std::chrono::milliseconds lease) {
  beforeCall();
  return semaphores().extend(name, token, lease);
}

bool MemoryOperator::doLeavePermitQueue(std::string_view name, std::string_view token) {
  beforeCall();
  return semaphores().leave(name, token);
}

std::unique_ptr<IGrantWatch> MemoryOperator::doWatchPermitGrants(std::string_view name, std::string_view token) {
  return semaphores().watch(name, token);
}

std::uint32_t MemoryOperator::doResizeSemaphore(std::string_view name, std::uint32_t capacity) {
  beforeCall();
  return semaphores().resize(name, capacity);
}

SemaphoreInfo MemoryOperator::doInspectSemaphore(std::string_view name) {
  beforeCall();
  return semaphores().inspect(name);
}

}  // namespace dlock
