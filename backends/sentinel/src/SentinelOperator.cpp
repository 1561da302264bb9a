#include "dlock/sentinel/SentinelOperator.h"

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "ConnectionPool.h"
#include "Errors.h"
#include "KeyNames.h"
#include "MasterResolver.h"
#include "Replies.h"
#include "Scripts.h"
#include "Subscriber.h"
#include "SwitchListener.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"

namespace dlock {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

// After a failed call, the sentinels are asked again at most this often: callers failing
// together share one answer, and a retry loop during a failover does not flood the sentinels.
constexpr milliseconds kMinResolveInterval{100};

// An error reply that means "this node does not take writes now": the command did not run, and
// the master may have moved. (READONLY: a replica; MASTERDOWN: a replica cut off from its master;
// LOADING: a node that restarted; NOREPLICAS: a master short of min-replicas-to-write.)
bool isNotMasterReply(const redisReply& reply) {
  for (const char* prefix : {"READONLY", "MASTERDOWN", "LOADING", "NOREPLICAS"}) {
    if (detail::isErrorReply(reply, prefix)) return true;
  }
  return false;
}

// Thrown inside a call for a not-master reply; never leaves this file (see run()).
class NotMaster : public ConnectionError {
 public:
  using ConnectionError::ConnectionError;
};

// A message without its leading "dlock: ", to append to another.
std::string withoutPrefix(const std::string& message) {
  constexpr std::string_view kPrefix = "dlock: ";
  return message.compare(0, kPrefix.size(), kPrefix) == 0 ? message.substr(kPrefix.size()) : message;
}

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
  return sentinel;
}

}  // namespace

class SentinelOperator::Impl {
 public:
  // The master calls go to, with its pool. Replaced, never changed, when the master moves.
  struct Master {
    detail::MasterAddress address;
    std::string text;    // "host:port"
    std::uint64_t epoch;  // 1 for the first master found, +1 per switch
    std::unique_ptr<detail::ConnectionPool> pool;
  };
  using MasterPtr = std::shared_ptr<const Master>;

  explicit Impl(SentinelOptions options)
      : options_(validated(std::move(options))),
        resolver_(options_.sentinels, options_.masterName, sentinelConnection(options_), options_.connection),
        listener_([this] { return resolver_.nextSentinel(); }, options_.pool, [this] { return resolveAfterSwitch(); }),
        releases_([this] { return resolver_.dataOptions(current()->address); }, options_.pool) {}

  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // The listener's thread calls releases_ and the releases' thread may start the listener: stop
  // the listener first, then the members go in reverse order (releases_ first).
  ~Impl() { listener_.stop(); }

  // The master now; finds it first if none is known yet.
  MasterPtr current() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (master_) return master_;
    }
    listener_.start();
    return resolve(nullptr, false);
  }

  // Asks the sentinels for the master and switches to it when it moved. `failed`: the master a
  // call just failed on (nullptr: none). Unless `forced`, a resolution finished less than
  // kMinResolveInterval ago stands, and one that already moved away from `failed` is kept.
  // Throws what MasterResolver::resolve throws when no master is known afterwards.
  MasterPtr resolve(const Master* failed, bool forced) {
    std::lock_guard<std::mutex> serial(resolveMutex_);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (master_ && failed != nullptr && master_->epoch != failed->epoch) return master_;
      if (master_ && failed == nullptr && !forced) return master_;
      if (!forced && resolvedAt_ && Steady::now() - *resolvedAt_ < kMinResolveInterval) {
        if (master_) return master_;
        throw ConnectionError(lastError_);
      }
    }
    std::optional<detail::MasterAddress> found;
    try {
      found = resolver_.resolve();
    } catch (const LockError& failure) {
      // The master we had, if any, stays: it may be only the sentinels that are away.
      std::lock_guard<std::mutex> guard(mutex_);
      resolvedAt_ = Steady::now();
      lastError_ = failure.what();
      throw;
    }
    MasterPtr previous;
    MasterPtr now;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      resolvedAt_ = Steady::now();
      lastError_.clear();
      if (master_ && master_->address == *found) return master_;
      previous = master_;
      auto next = std::make_shared<Master>();
      next->address = *found;
      next->text = found->address();
      next->epoch = previous ? previous->epoch + 1 : 1;
      next->pool = std::make_unique<detail::ConnectionPool>(resolver_.dataOptions(*found), options_.pool);
      master_ = next;
      now = master_;
      if (previous) {
        switches_.fetch_add(1, std::memory_order_relaxed);
        retiredReconnects_.fetch_add(previous->pool->reconnects(), std::memory_order_relaxed);
      }
    }
    if (previous) {
      detail::logger()->warn("dlock: master '{}' moved from {} to {}", options_.masterName, previous->text, now->text);
      releases_.reconnect();  // waiters wake and try again on the new master
    }
    return now;
  }

  // For the switch listener: true when a master is confirmed.
  bool resolveAfterSwitch() noexcept {
    try {
      (void)resolve(nullptr, true);
      return true;
    } catch (const std::exception& error) {
      try {
        detail::logger()->debug("dlock: looking for master '{}' after a switch message: {}", options_.masterName,
                                error.what());
      } catch (...) {
      }
      return false;
    }
  }

  // Runs `operation(connection, master)` on the master. A failure before the command can have run
  // (no connection; a not-master reply; a pooled connection found dead) is retried once on the
  // master the sentinels name now, when it moved (or, for a dead pooled connection, on the same
  // one). Any other failure is a ConnectionError after the sentinels were asked again.
  template <class Operation>
  auto run(Operation&& operation)
      -> decltype(operation(std::declval<detail::Connection&>(), std::declval<const Master&>())) {
    MasterPtr master = current();
    for (int attempt = 0;; ++attempt) {
      bool unsent = false;  // the command cannot have run
      bool stale = false;   // a pooled connection had died while idle
      std::string failure;
      {
        std::optional<detail::ConnectionPool::Handle> handle;
        try {
          handle.emplace(master->pool->borrow());
        } catch (const ConnectionError& error) {
          unsent = true;
          failure = error.what();
        }
        if (handle) {
          try {
            return operation(**handle, *master);
          } catch (const NotMaster& error) {
            unsent = true;
            failure = error.what();
          } catch (const ConnectionError& error) {
            stale = handle->reused() && (*handle)->broken() && !(*handle)->timedOut();
            failure = error.what();
          }
        }
      }  // the connection goes back (or, broken, away) before the sentinels are asked
      MasterPtr next = master;
      std::string resolveError;
      try {
        next = resolve(master.get(), false);
      } catch (const LockError& error) {
        resolveError = error.what();
      }
      const bool moved = next != master;
      if (attempt == 0 && ((unsent && moved) || stale)) {
        master = next;
        continue;
      }
      if (!resolveError.empty()) failure += "; then " + withoutPrefix(resolveError);
      throw ConnectionError(failure);
    }
  }

  std::string where(const char* operation, std::string_view key, const Master& master) const {
    return std::string(operation) + " " + detail::quoteKey(key) + " on " + master.text + " (master '" +
           options_.masterName + "')";
  }

  // Throws NotMaster for a not-master reply; leaves every other reply to the strict readers.
  static void checkMaster(const redisReply& reply, const std::string& where) {
    if (isNotMasterReply(reply)) {
      throw NotMaster("dlock: " + where + ": not a master now: " + std::string(detail::replyText(reply)));
    }
  }

  // After an acquire on `connection`: WAIT for the replicas; with too few, releases the key and
  // throws ConnectionError.
  void awaitReplicas(detail::Connection& connection, const detail::KeyNames& names, std::string_view token,
                     const std::string& where) {
    const std::string replicas = std::to_string(options_.waitReplicas);
    const std::string timeout = std::to_string(options_.waitTimeout.count());
    connection.setReadTimeout(options_.waitTimeout + options_.connection.commandTimeout);
    const detail::ReplyPtr reply = connection.command({"WAIT", replicas, timeout});
    connection.setReadTimeout(options_.connection.commandTimeout);
    const std::uint64_t acknowledged = detail::readCountReply(*reply, where + ": WAIT");
    if (acknowledged >= options_.waitReplicas) return;
    const detail::ReplyPtr released =
        detail::runScript(connection, detail::releaseScript(), {names.lock}, {token, names.channel});
    const bool undone = released->type != REDIS_REPLY_ERROR && detail::readReleaseReply(*released, where).released;
    throw ConnectionError("dlock: " + where + ": only " + std::to_string(acknowledged) + " of " + replicas +
                          " replicas acknowledged the lock within " + timeout + " ms; " +
                          (undone ? "released it" : "could not release it; it ends at its TTL"));
  }

  const SentinelOptions options_;
  detail::MasterResolver resolver_;

  mutable std::mutex mutex_;
  MasterPtr master_;                              // guarded by mutex_
  std::optional<Steady::time_point> resolvedAt_;  // guarded by mutex_; when the last resolution ended
  std::string lastError_;                         // guarded by mutex_; why it failed, if it did
  std::mutex resolveMutex_;                       // one resolution at a time
  std::atomic<std::uint64_t> switches_{0};
  std::atomic<std::uint64_t> retiredReconnects_{0};  // of the pools of earlier masters

  // Last: their threads use the members above (see ~Impl).
  detail::SwitchListener listener_;  // +switch-master, on the sentinels
  detail::Subscriber releases_;      // release messages, on the master now
};

SentinelOperator::SentinelOperator(SentinelOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

SentinelOperator::~SentinelOperator() = default;

AcquireResult SentinelOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  const detail::KeyNames names = detail::keyNames(impl_->options_.keyPrefix, key);
  const std::string ttlText = std::to_string(ttl.count());
  return impl_->run([&](detail::Connection& connection, const Impl::Master& master) {
    const std::string where = impl_->where("lock", key, master);
    const detail::ReplyPtr reply =
        detail::runScript(connection, detail::acquireScript(), {names.lock, names.fence}, {token, ttlText});
    Impl::checkMaster(*reply, where);
    const AcquireResult result = detail::readAcquireReply(*reply, where);
    if (result.acquired && impl_->options_.waitReplicas > 0) impl_->awaitReplicas(connection, names, token, where);
    return result;
  });
}

ReleaseResult SentinelOperator::unlock(std::string_view key, std::string_view token) {
  const detail::KeyNames names = detail::keyNames(impl_->options_.keyPrefix, key);
  return impl_->run([&](detail::Connection& connection, const Impl::Master& master) {
    const std::string where = impl_->where("unlock", key, master);
    const detail::ReplyPtr reply =
        detail::runScript(connection, detail::releaseScript(), {names.lock}, {token, names.channel});
    Impl::checkMaster(*reply, where);
    ReleaseResult result = detail::readReleaseReply(*reply, where);
    // Our own subscriber is not a waiter of another process.
    if (result.notified > 0 && impl_->releases_.subscribed(names.channel)) --result.notified;
    return result;
  });
}

bool SentinelOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  const detail::KeyNames names = detail::keyNames(impl_->options_.keyPrefix, key);
  const std::string ttlText = std::to_string(ttl.count());
  return impl_->run([&](detail::Connection& connection, const Impl::Master& master) {
    const std::string where = impl_->where("extend", key, master);
    const detail::ReplyPtr reply = detail::runScript(connection, detail::extendScript(), {names.lock}, {token, ttlText});
    Impl::checkMaster(*reply, where);
    return detail::readFlagReply(*reply, where);
  });
}

std::vector<bool> SentinelOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (leases.empty()) return {};
  const std::string ttlText = std::to_string(ttl.count());
  std::vector<std::string> lockKeys;
  lockKeys.reserve(leases.size());
  for (const auto& lease : leases) lockKeys.push_back(detail::keyNames(impl_->options_.keyPrefix, lease.key).lock);
  std::vector<std::pair<detail::Argv, detail::Argv>> calls;
  calls.reserve(leases.size());
  for (std::size_t i = 0; i < leases.size(); ++i) calls.push_back({{lockKeys[i]}, {leases[i].token, ttlText}});
  return impl_->run([&](detail::Connection& connection, const Impl::Master& master) {
    const auto replies = detail::runScriptPipelined(connection, detail::extendScript(), calls);
    std::vector<bool> extended;
    extended.reserve(replies.size());
    for (std::size_t i = 0; i < replies.size(); ++i) {
      const std::string where = impl_->where("extend", leases[i].key, master);
      Impl::checkMaster(*replies[i], where);
      extended.push_back(detail::readFlagReply(*replies[i], where));
    }
    return extended;
  });
}

std::uint64_t SentinelOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  const detail::KeyNames names = detail::keyNames(impl_->options_.keyPrefix, key);
  const std::string wanted = std::to_string(atLeast);
  return impl_->run([&](detail::Connection& connection, const Impl::Master& master) {
    const std::string where = impl_->where("raiseFence", key, master);
    const detail::ReplyPtr reply = detail::runScript(connection, detail::raiseFenceScript(), {names.fence}, {wanted});
    Impl::checkMaster(*reply, where);
    return detail::readCountReply(*reply, where);
  });
}

std::unique_ptr<IReleaseWatch> SentinelOperator::watch(std::string_view key) {
  (void)impl_->current();  // the subscriber's target is the master: find it first
  return impl_->releases_.watch(detail::keyNames(impl_->options_.keyPrefix, key).channel);
}

LeaseInfo SentinelOperator::inspect(std::string_view key) {
  const detail::KeyNames names = detail::keyNames(impl_->options_.keyPrefix, key);
  return impl_->run([&](detail::Connection& connection, const Impl::Master& master) {
    const std::string where = impl_->where("inspect", key, master);
    const detail::ReplyPtr reply = detail::runScript(connection, detail::inspectScript(), {names.lock, names.fence}, {});
    Impl::checkMaster(*reply, where);
    return detail::readInspectReply(*reply, where);
  });
}

std::string SentinelOperator::describe() const {
  std::string text = "redis+sentinel://" + impl_->resolver_.sentinelList() + "/" + impl_->options_.masterName;
  const std::string master = masterAddress();
  if (!master.empty()) text += " (master " + master + ")";
  return text;
}

std::string SentinelOperator::masterAddress() const {
  std::lock_guard<std::mutex> guard(impl_->mutex_);
  return impl_->master_ ? impl_->master_->text : std::string();
}

std::uint64_t SentinelOperator::masterSwitches() const noexcept {
  return impl_->switches_.load(std::memory_order_relaxed);
}

std::uint64_t SentinelOperator::reconnects() const noexcept {
  std::uint64_t total = impl_->retiredReconnects_.load(std::memory_order_relaxed) + impl_->releases_.reconnects();
  try {
    std::lock_guard<std::mutex> guard(impl_->mutex_);
    if (impl_->master_) total += impl_->master_->pool->reconnects();
  } catch (...) {
  }
  return total;
}

}  // namespace dlock
