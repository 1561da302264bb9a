// SPDX-License-Identifier: Apache-2.0
#include "MemoryReadWrite.h"

#include <algorithm>

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

// What is left of a hold ending at `ends`: at least 1 ms while it lasts, as the scripts answer.
milliseconds leftOf(Clock::time_point ends, Clock::time_point now) {
  return std::max(milliseconds(1), std::chrono::floor<milliseconds>(ends - now));
}

char letterOf(ReadWriteMode mode) { return mode == ReadWriteMode::Read ? 'r' : 'w'; }

constexpr char kTombstone = '0';

// Records are dropped when looked up after their time; past this many, the ended ones go at once.
constexpr std::size_t kRecordsBeforeSweep = 64;

}  // namespace

struct MemoryReadWrite::Name {
  struct Writer {
    std::string token;
    Clock::time_point ends;
  };
  struct Record {
    char what;  // 'r' or 'w': a release of that hold ran; kTombstone: the token left for good
    Clock::time_point until;
  };

  std::optional<Writer> writer;
  std::map<std::string, Clock::time_point, std::less<>> readers;  // token → lease end
  MemoryFairQueue queue;
  std::uint64_t fence = 0;
  std::map<std::string, Record, std::less<>> records;

  // Drops holds whose lease ended by `now`: every decision is made on live holds.
  void reclaim(Clock::time_point now) {
    if (writer && writer->ends <= now) writer.reset();
    for (auto it = readers.begin(); it != readers.end();) it = it->second <= now ? readers.erase(it) : std::next(it);
  }
  [[nodiscard]] bool writes(std::string_view token) const { return writer && writer->token == token; }
  [[nodiscard]] const Clock::time_point* reads(std::string_view token) const {
    const auto it = readers.find(token);
    return it == readers.end() ? nullptr : &it->second;
  }
  // The longest remaining hold, zero when none: what bounds a waiter's sleep.
  [[nodiscard]] milliseconds holdersTtl(Clock::time_point now) const {
    Clock::time_point last = now;
    if (writer) last = std::max(last, writer->ends);
    for (const auto& [token, ends] : readers) last = std::max(last, ends);
    return std::chrono::ceil<milliseconds>(last - now);
  }
  std::uint64_t nextFence(std::string_view name) {
    // As the Redis counter (INCR): it stops at 2^63 - 1, refusing before a hold is written.
    if (fence >= kMaxFencingToken) {
      throw BackendError("dlock: acquireWrite " + quoteKey(name) + " on memory://: the fencing counter is at its limit");
    }
    return ++fence;
  }
  // The token's live record, or nullptr.
  Record* record(std::string_view token, Clock::time_point now) {
    const auto it = records.find(token);
    if (it == records.end()) return nullptr;
    if (it->second.until > now) return &it->second;
    records.erase(it);
    return nullptr;
  }
  void remember(std::string_view token, char what, Clock::time_point until, Clock::time_point now) {
    if (records.size() >= kRecordsBeforeSweep) {
      for (auto it = records.begin(); it != records.end();) it = it->second.until <= now ? records.erase(it) : std::next(it);
    }
    records.insert_or_assign(std::string(token), Record{what, until});
  }
};

class MemoryReadWrite::GrantWatch final : public IGrantWatch {
 public:
  GrantWatch(std::shared_ptr<MemoryReadWrite> owner, std::string name, std::string token)
      : owner_(std::move(owner)), name_(std::move(name)), token_(std::move(token)) {
    std::lock_guard<std::mutex> guard(owner_->mutex_);
    owner_->named(name_).queue.watch(token_);
  }
  GrantWatch(const GrantWatch&) = delete;
  GrantWatch& operator=(const GrantWatch&) = delete;
  ~GrantWatch() override {
    std::lock_guard<std::mutex> guard(owner_->mutex_);
    owner_->named(name_).queue.unwatch(token_);
  }

  Grant waitForGrant(milliseconds timeout) override {
    std::unique_lock<std::mutex> guard(owner_->mutex_);
    std::optional<Grant> grant;
    Wakeup::waitFor(owner_->granted_, guard, timeout, [&] {
      grant = owner_->named(name_).queue.takeGrant(token_);
      return grant.has_value();
    });
    return grant.value_or(Grant{});
  }

  bool notifyOnGrant(std::function<void()> heard) override {
    std::lock_guard<std::mutex> guard(owner_->mutex_);
    if (!heard || notified_) return false;
    owner_->named(name_).queue.notify(token_, std::move(heard));
    notified_ = true;
    return true;
  }

 private:
  bool notified_ = false;
  const std::shared_ptr<MemoryReadWrite> owner_;
  const std::string name_;
  const std::string token_;
};

MemoryReadWrite::MemoryReadWrite(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

MemoryReadWrite::~MemoryReadWrite() = default;

MemoryReadWrite::Name& MemoryReadWrite::named(std::string_view name) {
  auto it = names_.find(name);
  if (it == names_.end()) it = names_.emplace(std::string(name), std::make_unique<Name>()).first;
  return *it->second;
}

std::uint32_t MemoryReadWrite::admit(std::string_view name, Name& state, Clock::time_point now, std::string_view self) {
  if (state.writer) return 0;
  std::uint32_t admitted = 0;
  while (const MemoryFairQueue::Waiter* head = state.queue.front()) {
    const bool isSelf = head->token == self;
    if (head->leaseEnds <= now && !isSelf) {
      state.queue.popFront();
      continue;
    }
    if (!head->reader && !state.readers.empty()) break;  // a writer waits for the readers
    // The claim lease, as the script's: the waiter's ttl, or the rest of its waiter lease if less.
    const milliseconds claim = isSelf ? head->ttl : std::min(head->ttl, leftOf(head->leaseEnds, now));
    Grant grant{Grant::Kind::Granted, 0, clockMillis(now), claim};
    const std::string token = head->token;
    const bool reader = head->reader;
    if (reader) {
      state.readers[token] = now + claim;
      grant.fencingToken = state.fence;
    } else {
      grant.fencingToken = state.nextFence(name);
      state.writer = Name::Writer{token, now + claim};
    }
    state.queue.popFront();
    if (!isSelf) state.queue.tell(token, grant);
    ++admitted;
    if (!reader) break;
  }
  return admitted;
}

std::uint32_t MemoryReadWrite::handOn(std::unique_lock<std::mutex>& guard, std::string_view name, Name& state,
                                      Clock::time_point now) {
  state.queue.prune(now, {});
  const std::uint32_t admitted = admit(name, state, now, {});
  guard.unlock();
  if (admitted > 0) granted_.notify_all();
  return admitted;
}

FairAcquireResult MemoryReadWrite::acquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                                           milliseconds ttl, milliseconds waiterLease) {
  std::unique_lock<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  Name& state = named(name);
  FairAcquireResult result;
  result.backendMillis = clockMillis(now);
  if (const Name::Record* record = state.record(token, now)) {
    if (record->what == kTombstone) return result;
    // An earlier hold's release is no later hold's: a retry of that later release must not find it.
    if (record->what == letterOf(mode)) state.records.erase(state.records.find(token));
  }
  state.reclaim(now);
  const bool reads = mode == ReadWriteMode::Read;
  // Ours already (a retried attempt, a grant whose message is on its way): the same answer.
  const Clock::time_point* held = reads ? state.reads(token) : (state.writes(token) ? &state.writer->ends : nullptr);
  if (held != nullptr) {
    result.acquired = true;
    result.fencingToken = state.fence;
    result.validity = leftOf(*held, now);
    return result;
  }
  if (reads && state.writes(token)) {  // the writer's own read hold: at once, whoever waits
    state.readers[std::string(token)] = now + ttl;
    result.acquired = true;
    result.fencingToken = state.fence;
    return result;
  }
  if (!reads && state.reads(token) != nullptr) {  // it would wait for itself: tryUpgrade's part
    result.holderTtl = state.holdersTtl(now);
    return result;
  }
  state.queue.prune(now, token);
  const std::uint32_t admitted = admit(name, state, now, token);
  const bool self = reads ? state.reads(token) != nullptr : state.writes(token);
  if (!self && !state.writer && state.queue.empty() && (reads || state.readers.empty())) {
    if (reads) {
      state.readers[std::string(token)] = now + ttl;
    } else {
      state.writer = Name::Writer{std::string(token), now + ttl};
      state.nextFence(name);
    }
    result.acquired = true;
    result.fencingToken = state.fence;
  } else if (self) {
    result.acquired = true;
    result.fencingToken = state.fence;
  } else {
    result.holderTtl = state.holdersTtl(now);
    // Not ours: a hand-off heard of later would answer an earlier attempt.
    state.queue.forgetGrant(token);
    if (waiterLease.count() > 0) result.position = state.queue.join(token, ttl, now + waiterLease, reads);
  }
  guard.unlock();
  if (admitted > 0) granted_.notify_all();
  return result;
}

ReleaseResult MemoryReadWrite::release(std::string_view name, std::string_view token, ReadWriteMode mode) {
  std::unique_lock<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  Name& state = named(name);
  state.reclaim(now);
  ReleaseResult result;
  Clock::time_point ends{};
  if (mode == ReadWriteMode::Write && state.writes(token)) {
    ends = state.writer->ends;
    state.writer.reset();
  } else if (const Clock::time_point* read = mode == ReadWriteMode::Read ? state.reads(token) : nullptr) {
    ends = *read;
    state.readers.erase(state.readers.find(token));
  } else {
    const Name::Record* record = state.record(token, now);
    result.released = result.releasedEarlier = record != nullptr && record->what == letterOf(mode);
    return result;
  }
  state.remember(token, letterOf(mode), ends, now);  // as long as the hold would have lasted
  result.released = true;
  result.notified = handOn(guard, name, state, now);
  return result;
}

bool MemoryReadWrite::downgrade(std::string_view name, std::string_view token, milliseconds ttl) {
  std::unique_lock<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  Name& state = named(name);
  state.reclaim(now);
  if (!state.writes(token)) return state.reads(token) != nullptr;  // a retry whose first try ran
  state.readers[std::string(token)] = now + ttl;
  state.writer.reset();
  (void)handOn(guard, name, state, now);
  return true;
}

FairAcquireResult MemoryReadWrite::tryUpgrade(std::string_view name, std::string_view token, milliseconds ttl) {
  std::lock_guard<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  Name& state = named(name);
  state.reclaim(now);
  FairAcquireResult result;
  result.backendMillis = clockMillis(now);
  if (state.writes(token)) {  // a retry whose first try ran
    result.acquired = true;
    result.fencingToken = state.fence;
    result.validity = leftOf(state.writer->ends, now);
  } else if (!state.writer && state.readers.size() == 1 && state.reads(token) != nullptr) {
    result.fencingToken = state.nextFence(name);
    state.readers.clear();
    state.writer = Name::Writer{std::string(token), now + ttl};
    result.acquired = true;
  } else {
    result.holderTtl = state.holdersTtl(now);
  }
  return result;
}

std::vector<ExtendResult> MemoryReadWrite::extend(const std::vector<ReadWriteLease>& leases, milliseconds ttl) {
  std::lock_guard<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  std::vector<ExtendResult> results(leases.size());
  for (std::size_t i = 0; i < leases.size(); ++i) {
    Name& state = named(leases[i].name);
    state.reclaim(now);
    const std::string_view token = leases[i].token;
    if (leases[i].mode == ReadWriteMode::Write && state.writes(token)) {
      state.writer->ends = now + ttl;
      results[i].extended = true;
    } else if (leases[i].mode == ReadWriteMode::Read && state.reads(token) != nullptr) {
      state.readers.find(token)->second = now + ttl;
      results[i].extended = true;
    }
  }
  return results;
}

bool MemoryReadWrite::leave(std::string_view name, std::string_view token, ReadWriteMode mode, milliseconds ttl) {
  std::unique_lock<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  Name& state = named(name);
  state.remember(token, kTombstone, now + ttl, now);
  state.queue.leave(token);
  state.reclaim(now);
  bool released = false;
  if (mode == ReadWriteMode::Write && state.writes(token)) {
    state.writer.reset();
    released = true;
  } else if (mode == ReadWriteMode::Read && state.reads(token) != nullptr) {
    state.readers.erase(state.readers.find(token));
    released = true;
  }
  (void)handOn(guard, name, state, now);  // also a name whose holder's lease ran out
  return released;
}

std::unique_ptr<IGrantWatch> MemoryReadWrite::watch(std::string_view name, std::string_view token) {
  return std::make_unique<GrantWatch>(shared_from_this(), std::string(name), std::string(token));
}

ReadWriteInfo MemoryReadWrite::inspect(std::string_view name) {
  std::lock_guard<std::mutex> guard(mutex_);
  const Clock::time_point now = clock_->now();
  ReadWriteInfo info;
  const auto it = names_.find(name);
  if (it == names_.end()) return info;
  const Name& state = *it->second;
  info.fencingToken = state.fence;
  if (state.writer && state.writer->ends > now) {
    info.writer = ReadWriteInfo::Hold{state.writer->token, leftOf(state.writer->ends, now)};
  }
  for (const auto& [token, ends] : state.readers) {
    if (ends > now) info.readers.push_back(ReadWriteInfo::Hold{token, leftOf(ends, now)});
  }
  std::stable_sort(info.readers.begin(), info.readers.end(),
                   [](const auto& a, const auto& b) { return a.remaining < b.remaining; });
  for (const auto& waiter : state.queue.waiters()) {
    if (waiter.leaseEnds > now) {
      info.waiters.push_back({waiter.token, waiter.reader ? ReadWriteMode::Read : ReadWriteMode::Write});
    }
  }
  return info;
}

void MemoryReadWrite::forget() {
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto& [name, state] : names_) {
    state->writer.reset();
    state->readers.clear();
    state->records.clear();
    state->queue.clearWaiters();
  }
}

}  // namespace dlock::detail

// MemoryOperator's read-write locks: each call counted, delayed and failed as the others are.
namespace dlock {

using std::chrono::milliseconds;

FairAcquireResult MemoryOperator::doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                                            milliseconds ttl, milliseconds waiterLease) {
  beforeCall();
  return readWrite().acquire(name, token, mode, ttl, waiterLease);
}

ReleaseResult MemoryOperator::doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) {
  beforeCall();
  return readWrite().release(name, token, mode);
}

bool MemoryOperator::doDowngrade(std::string_view name, std::string_view token, milliseconds ttl) {
  beforeCall();
  return readWrite().downgrade(name, token, ttl);
}

FairAcquireResult MemoryOperator::doTryUpgrade(std::string_view name, std::string_view token, milliseconds ttl) {
  beforeCall();
  return readWrite().tryUpgrade(name, token, ttl);
}

bool MemoryOperator::doExtend(const ReadWriteLease& lease, milliseconds ttl) {
  beforeCall();
  return readWrite().extend({lease}, ttl).front().extended;
}

std::vector<ExtendResult> MemoryOperator::doExtendAll(const std::vector<ReadWriteLease>& leases, milliseconds ttl) {
  beforeCall();
  return readWrite().extend(leases, ttl);
}

bool MemoryOperator::doLeave(std::string_view name, std::string_view token, ReadWriteMode mode, milliseconds ttl) {
  beforeCall();
  return readWrite().leave(name, token, mode, ttl);
}

std::unique_ptr<IGrantWatch> MemoryOperator::doWatch(std::string_view name, std::string_view token) {
  return readWrite().watch(name, token);
}

ReadWriteInfo MemoryOperator::doInspect(std::string_view name) {
  beforeCall();
  return readWrite().inspect(name);
}

}  // namespace dlock
