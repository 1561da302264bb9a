// SPDX-License-Identifier: Apache-2.0
#include "SentinelTopology.h"

#include <algorithm>
#include <utility>

#include "redis/src/Errors.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// After a failed call, the sentinels are asked again at most this often: callers failing
// together share one answer, and a retry loop during a failover does not flood the sentinels.
constexpr milliseconds kMinResolveInterval{100};
// How long a master failed over is not taken from a sentinel that still names it (it keeps
// answering ROLE master until the sentinels turn it into a replica, about 10 s later).
constexpr milliseconds kDemotedFor{30000};
// A promotion the sentinels announced is awaited this long, polling ROLE this often.
constexpr milliseconds kPromotionWait{5000};
constexpr milliseconds kPromotionPoll{10};

SentinelOptions validated(SentinelOptions options) {
  if (options.sentinels.empty()) throw ConfigError("dlock: sentinel: no sentinel address given");
  for (const auto& sentinel : options.sentinels) {
    if (sentinel.host.empty() || sentinel.port < 1 || sentinel.port > 65535) {
      throw ConfigError("dlock: sentinel: bad sentinel address '" + sentinel.address() + "'");
    }
  }
  if (options.masterName.empty()) throw ConfigError("dlock: sentinel: no master name given");
  if (options.pool.size == 0) throw ConfigError("dlock: sentinel: the pool size must be at least 1");
  if (options.sentinelConnectTimeout.count() <= 0 || options.sentinelCommandTimeout.count() <= 0) {
    throw ConfigError("dlock: sentinel: the sentinel timeouts must be positive");
  }
  if (options.waitReplicas > 0 && options.waitTimeout.count() <= 0) {
    throw ConfigError("dlock: sentinel: waitTimeout must be positive when waitReplicas is set (WAIT 0 blocks forever)");
  }
  return options;
}

ConnectionOptions sentinelConnection(const SentinelOptions& options) {
  ConnectionOptions sentinel;
  sentinel.user = options.sentinelUser;
  sentinel.password = options.sentinelPassword;
  sentinel.connectTimeout = options.sentinelConnectTimeout;
  sentinel.commandTimeout = options.sentinelCommandTimeout;
  sentinel.keepAlive = options.connection.keepAlive;
  sentinel.serverClock = false;  // a Sentinel has no TIME, and runs no script
  sentinel.tls = options.connection.tls;  // sentinels and the nodes they name, alike
  return sentinel;
}

}  // namespace

SentinelTopology::SentinelTopology(SentinelOptions options)
    : options_(validated(std::move(options))),
      resolver_(options_.sentinels, options_.masterName, sentinelConnection(options_), options_.connection),
      events_(resolver_.sentinels(), options_.pool, [this](const SentinelEvent& event) { onEvent(event); }) {
  promotions_ = std::thread([this] { watchPromotions(); });  // once every member exists
}

// The event and promotion threads call into the members: stop those first, then the members go
// in reverse order.
SentinelTopology::~SentinelTopology() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  events_.stop();
  if (promotions_.joinable()) promotions_.join();
}

// The master now; finds it first if none is known yet.
RedisNode* SentinelTopology::current() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (master_ != nullptr) return master_;
  }
  events_.start();
  return resolve(Reason::Unknown, nullptr);
}

// Caller holds mutex_. True while the sentinels are promoting a replica in place of the master
// we use: calls wait for the promotion to move us rather than go to a master being demoted.
bool SentinelTopology::leavingLocked() const {
  return !stopping_ && failover_ && !failover_->gaveUp && failover_->from == masterAddress_;
}

Route SentinelTopology::route(std::uint16_t slot) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (master_ != nullptr && !leavingLocked()) return Route{master_, slot, false, version_, {}};
  }
  (void)current();
  std::lock_guard<std::mutex> guard(mutex_);
  if (!leavingLocked()) return Route{master_, slot, false, version_, {}};
  return Route{nullptr, slot, false, version_,
               "master '" + options_.masterName + "' at " + masterAddress_.address() + " is being failed over to " +
                   failover_->to.address() + ", not promoted yet"};
}

void SentinelTopology::awaitChange(std::uint64_t version, milliseconds pause) {
  std::unique_lock<std::mutex> guard(mutex_);
  const bool leaving = leavingLocked();  // then the promotion's end, too, is what the call waits for
  (void)Wakeup::waitFor(changed_, guard, pause,
                        [&] { return stopping_ || version_ != version || (leaving && !leavingLocked()); });
}

Verdict SentinelTopology::afterReply(const Route& route, std::string_view error) {
  // READONLY, MASTERDOWN, LOADING...: the node is not a master that can serve now, and the
  // command did not run. Elsewhere if the sentinels name another, else the same after a pause.
  if (!isTransientErrorText(error)) return {};
  Verdict verdict = afterFailure(route, Failure::NoConnection);
  if (verdict.next == Next::Final && verdict.note.empty()) verdict.next = Next::Unchanged;
  return verdict;
}

Verdict SentinelTopology::afterFailure(const Route& route, Failure /*failure*/) {
  try {
    (void)resolve(Reason::Failure, route.node);
  } catch (const LockError& error) {
    return Verdict{Next::Final, std::nullopt, "; then " + withoutPrefix(error.what())};
  }
  std::lock_guard<std::mutex> guard(mutex_);
  // Moved, or moving: a promotion announced from this master; the next route waits for it.
  if (version_ != route.version || leavingLocked()) return Verdict{Next::Moved, std::nullopt, {}};
  return {};
}

bool SentinelTopology::retryable(std::string_view error) const { return isTransientErrorText(error); }

std::vector<RedisNode*> SentinelTopology::owners(const std::vector<std::uint16_t>& slots) {
  return std::vector<RedisNode*>(slots.size(), current());
}

bool SentinelTopology::serves(const RedisNode* node, std::uint16_t /*slot*/) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return node == master_;
}

// Asks the sentinels for the master and moves to it (see Reason). `failed`: the master a call
// failed on. Throws what MasterResolver::resolve throws when no master is known afterwards.
RedisNode* SentinelTopology::resolve(Reason reason, const RedisNode* failed) {
  std::lock_guard<std::mutex> serial(resolveMutex_);
  std::vector<MasterAddress> stale;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    const bool recent = resolvedAt_ && Steady::now() - *resolvedAt_ < kMinResolveInterval;
    if (reason == Reason::Unknown && master_ != nullptr) return master_;
    if (reason == Reason::Failure && master_ != nullptr && failed != nullptr && master_ != failed) return master_;
    if (reason != Reason::Forced && recent) {
      if (master_ != nullptr) return master_;
      if (lastError_) std::rethrow_exception(lastError_);  // its own type: a refusal stays a BackendError
    }
    stale = staleMasters();
  }
  MasterAddress found;
  try {
    found = resolver_.resolve(stale);
  } catch (const LockError&) {
    // The master we had, if any, stays: it may be only the sentinels that are away.
    std::lock_guard<std::mutex> guard(mutex_);
    resolvedAt_ = Steady::now();
    lastError_ = std::current_exception();
    throw;
  }
  return install(found, std::nullopt, "named by the sentinels");
}

RedisNode* SentinelTopology::nodeAtLocked(const MasterAddress& address) {
  auto& node = nodes_[address.address()];
  if (!node) {
    const std::string displayAddress = address.address() + " (master '" + options_.masterName + "')";
    node = std::make_unique<RedisNode>(resolver_.dataOptions(address), options_.pool, false, displayAddress);
  }
  return node.get();
}

// Moves to `to` (confirmed a master by the caller, who holds resolveMutex_); `from`, if given,
// was failed over.
RedisNode* SentinelTopology::install(const MasterAddress& to, const std::optional<MasterAddress>& from,
                                     const char* why) {
  RedisNode* previous = nullptr;
  RedisNode* now = nullptr;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    resolvedAt_ = Steady::now();
    lastError_ = nullptr;
    if (from && *from != to) {
      forgetDemoted(*from);
      demoted_.emplace_back(*from, Steady::now() + kDemotedFor);
    }
    const bool moving = master_ == nullptr || masterAddress_ != to;
    // The announced promotion is done, or we leave its old master another way.
    if (failover_ && (failover_->to == to || (moving && master_ != nullptr && failover_->from == masterAddress_))) {
      failover_.reset();
    }
    if (!moving) {
      changed_.notify_all();
      return master_;
    }
    previous = master_;
    master_ = nodeAtLocked(to);
    masterAddress_ = to;
    ++version_;
    now = master_;
    if (previous != nullptr) switches_.fetch_add(1, std::memory_order_relaxed);
  }
  changed_.notify_all();
  if (previous != nullptr) {
    logger()->warn("dlock: master '{}' moved from {} to {} ({})", options_.masterName, previous->address(),
                   now->address(), why);
    previous->retireSubscriber();  // its waiters wake and try again on the new master
  }
  return now;
}

// Caller holds mutex_.
void SentinelTopology::forgetDemoted(const MasterAddress& address) {
  const auto named = [&](const auto& entry) { return entry.first == address; };
  demoted_.erase(std::remove_if(demoted_.begin(), demoted_.end(), named), demoted_.end());
}

// Masters a sentinel may still name though they are being, or were just, failed over.
// Caller holds mutex_.
std::vector<MasterAddress> SentinelTopology::staleMasters() {
  const auto now = Steady::now();
  const auto expired = [&](const auto& entry) { return entry.second <= now; };
  demoted_.erase(std::remove_if(demoted_.begin(), demoted_.end(), expired), demoted_.end());
  std::vector<MasterAddress> stale;
  for (const auto& entry : demoted_) stale.push_back(entry.first);
  if (failover_ && !failover_->gaveUp) stale.push_back(failover_->from);
  return stale;
}

// True when `node` answers ROLE with master; `probe` is kept across calls to the same node.
bool SentinelTopology::isMaster(const MasterAddress& node, std::unique_ptr<Connection>& probe) {
  try {
    if (!probe || probe->broken() || probe->address() != node.address()) {
      probe = std::make_unique<Connection>(resolver_.dataOptions(node));
    }
    return roleIn(*probe->command({"ROLE"})) == "master";
  } catch (const LockError&) {
    probe.reset();
    return false;
  }
}

// The promotion thread: while a promotion is announced, polls ROLE on the replica and moves there
// as soon as it is a master — before the sentinels name it, which they do only after their next
// INFO of it. Gives the promotion up after kPromotionWait. Its own thread, so the sentinel's next
// events (an abort) are not held up behind the polling.
void SentinelTopology::watchPromotions() {
  std::unique_ptr<Connection> probe;
  std::unique_lock<std::mutex> guard(mutex_);
  while (true) {
    changed_.wait(guard, [&] { return stopping_ || (failover_ && !failover_->gaveUp); });
    if (stopping_) return;
    const Failover failover = *failover_;
    if (Steady::now() >= failover.until) {
      failover_->gaveUp = true;
      guard.unlock();
      changed_.notify_all();
      logger()->warn("dlock: the sentinels announced {} as the new master '{}', but it was not a master "
                     "within {} ms; asking the sentinels again",
                     failover.to.address(), options_.masterName, kPromotionWait.count());
      guard.lock();
      continue;
    }
    guard.unlock();
    if (isMaster(failover.to, probe)) {
      std::lock_guard<std::mutex> serial(resolveMutex_);
      (void)install(failover.to, failover.from, "promoted by the sentinels");
      guard.lock();
      continue;
    }
    guard.lock();
    changed_.wait_for(guard, kPromotionPoll, [this] { return stopping_; });
  }
}

// The sentinels' failover events (see SentinelEvents.h), on the thread of the sentinel that spoke.
void SentinelTopology::onEvent(const SentinelEvent& event) noexcept {
  try {
    using Kind = SentinelEvent::Kind;
    if (event.kind == Kind::Resubscribed) {
      (void)resolve(Reason::Check, nullptr);  // a switch may have gone unseen
      return;
    }
    if (event.masterName != options_.masterName) return;
    switch (event.kind) {
      case Kind::Promoting:
      case Kind::Promoted: {
        {
          std::lock_guard<std::mutex> guard(mutex_);
          if (master_ != nullptr && masterAddress_ == event.to) return;  // moved already
          forgetDemoted(event.to);
          const Steady::time_point now = Steady::now();
          const bool known = failover_ && failover_->to == event.to &&
                             (!failover_->gaveUp || now < failover_->until + kPromotionWait);
          if (!known) failover_ = Failover{event.from, event.to, now + kPromotionWait};
        }
        changed_.notify_all();  // the promotion thread polls it
        return;
      }
      case Kind::Switched: {
        std::unique_ptr<Connection> probe;
        if (isMaster(event.to, probe)) {
          std::lock_guard<std::mutex> serial(resolveMutex_);
          (void)install(event.to, event.from, "switched by the sentinels");
        } else {
          (void)resolve(Reason::Forced, nullptr);
        }
        return;
      }
      case Kind::Aborted: {
        {
          std::lock_guard<std::mutex> guard(mutex_);
          if (failover_ && failover_->from == event.from) failover_.reset();
          forgetDemoted(event.from);
        }
        changed_.notify_all();
        return;
      }
      case Kind::Resubscribed:
        return;
    }
  } catch (const std::exception& error) {
    try {
      logger()->debug("dlock: after a sentinel event for master '{}': {}", options_.masterName, error.what());
    } catch (...) {
    }
  } catch (...) {
  }
}

std::string SentinelTopology::describe() const {
  std::string text = (options_.connection.tls.enabled ? "rediss+sentinel://" : "redis+sentinel://") +
                     resolver_.sentinelList() + "/" + options_.masterName;
  const std::string master = masterAddress();
  if (!master.empty()) text += " (master " + master + ")";
  return text;
}

std::string SentinelTopology::masterAddress() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return master_ != nullptr ? masterAddress_.address() : std::string();
}

std::uint64_t SentinelTopology::reconnects() const {
  std::uint64_t total = events_.reconnects();
  std::lock_guard<std::mutex> guard(mutex_);
  for (const auto& [name, node] : nodes_) total += node->reconnects();
  return total;
}

}  // namespace dlock::detail
