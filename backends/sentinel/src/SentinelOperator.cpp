#include "dlock/sentinel/SentinelOperator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "ConnectionPool.h"
#include "Errors.h"
#include "KeyNames.h"
#include "LockCommands.h"
#include "MasterResolver.h"
#include "Replies.h"
#include "SentinelEvents.h"
#include "Subscriber.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock {
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

namespace {

// What one process owns: the master it found and its pool, the sentinel subscriptions, the
// release subscriber and the promotion thread. A forked child makes its own at its first call and
// never touches the parent's.
class Connected {
 public:
  // The master calls go to, with its pool. Replaced, never changed, when the master moves, so
  // a caller tells whether it moved by comparing pointers.
  struct Master {
    detail::MasterAddress address;
    std::string text;   // "host:port"
    std::string label;  // "host:port (master 'name')", for messages
    std::unique_ptr<detail::ConnectionPool> pool;
  };
  using MasterPtr = std::shared_ptr<const Master>;

  // A promotion the sentinels announced that has not moved us yet. Calls for `from` wait for it
  // until `until`; after that it is given up (calls go on, the sentinels are asked as usual) but
  // kept, so the same announcement repeated does not hold calls again.
  struct Failover {
    detail::MasterAddress from;
    detail::MasterAddress to;
    Steady::time_point until;
    bool gaveUp = false;
  };

  // Why the sentinels are asked.
  enum class Reason {
    Unknown,  // no master yet: unless another caller found one meanwhile
    Failure,  // a call failed on a master: unless it moved meanwhile or was asked just now
    Check,    // a sentinel subscription (re)started: unless asked just now
    Forced,   // whatever happened before
  };

  explicit Connected(SentinelOptions options)
      : options_(validated(std::move(options))),
        resolver_(options_.sentinels, options_.masterName, sentinelConnection(options_), options_.connection),
        events_(resolver_.sentinels(), options_.pool, [this](const detail::SentinelEvent& event) { onEvent(event); }),
        releases_([this] { return resolver_.dataOptions(current()->address); }, options_.pool) {
    promotions_ = std::thread([this] { watchPromotions(); });  // once every member exists
  }

  Connected(const Connected&) = delete;
  Connected& operator=(const Connected&) = delete;
  // The event and promotion threads call releases_ and the releases' thread may start them: stop
  // those first, then the members go in reverse order.
  ~Connected() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    events_.stop();
    if (promotions_.joinable()) promotions_.join();
  }

  // The master now; finds it first if none is known yet.
  MasterPtr current() {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (master_) return master_;
    }
    events_.start();
    return resolve(Reason::Unknown, nullptr);
  }

  // The master a call may go to: the one now, unless the sentinels are promoting a replica in
  // its place; then waits (at most the command timeout) for the promotion to move us.
  // `operation` and `key` name the call in the error.
  MasterPtr usable(const char* operation, std::string_view key) {
    std::unique_lock<std::mutex> guard(mutex_);
    if (!master_) {
      guard.unlock();
      (void)current();
      guard.lock();
    }
    const auto leaving = [&] {
      return !stopping_ && failover_ && !failover_->gaveUp && failover_->from == master_->address;
    };
    if (!leaving()) return master_;
    const milliseconds timeout = options_.connection.commandTimeout;
    if (changed_.wait_for(guard, timeout, [&] { return !leaving(); })) return master_;
    throw ConnectionError("dlock: " + std::string(operation) + " " + detail::quoteKey(key) + ": master '" +
                          options_.masterName + "' at " + master_->text + " is being failed over to " +
                          failover_->to.address() + ", not promoted within " + std::to_string(timeout.count()) +
                          " ms");
  }

  // Asks the sentinels for the master and moves to it (see Reason). `failed`: the master a call
  // failed on. Throws what MasterResolver::resolve throws when no master is known afterwards.
  MasterPtr resolve(Reason reason, const Master* failed) {
    std::lock_guard<std::mutex> serial(resolveMutex_);
    std::vector<detail::MasterAddress> stale;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      const bool recent = resolvedAt_ && Steady::now() - *resolvedAt_ < kMinResolveInterval;
      if (reason == Reason::Unknown && master_) return master_;
      if (reason == Reason::Failure && master_ && failed != nullptr && master_.get() != failed) return master_;
      if (reason != Reason::Forced && recent) {
        if (master_) return master_;
        if (lastError_) std::rethrow_exception(lastError_);  // its own type: a refusal stays a BackendError
      }
      stale = staleMasters();
    }
    detail::MasterAddress found;
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

  // Moves to `to` (confirmed a master by the caller, who holds resolveMutex_); `from`, if given,
  // was failed over.
  MasterPtr install(const detail::MasterAddress& to, const std::optional<detail::MasterAddress>& from,
                    const char* why) {
    MasterPtr previous;
    MasterPtr now;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      resolvedAt_ = Steady::now();
      lastError_ = nullptr;
      if (from && *from != to) {
        forgetDemoted(*from);
        demoted_.emplace_back(*from, Steady::now() + kDemotedFor);
      }
      const bool moving = !master_ || master_->address != to;
      // The announced promotion is done, or we leave its old master another way.
      if (failover_ && (failover_->to == to || (moving && master_ && failover_->from == master_->address))) {
        failover_.reset();
      }
      if (!moving) {
        changed_.notify_all();
        return master_;
      }
      previous = master_;
      auto next = std::make_shared<Master>();
      next->address = to;
      next->text = to.address();
      next->label = next->text + " (master '" + options_.masterName + "')";
      next->pool = std::make_unique<detail::ConnectionPool>(resolver_.dataOptions(to), options_.pool);
      master_ = next;
      now = master_;
      if (previous) {
        switches_.fetch_add(1, std::memory_order_relaxed);
        retiredReconnects_.fetch_add(previous->pool->reconnects(), std::memory_order_relaxed);
      }
    }
    changed_.notify_all();
    if (previous) {
      detail::logger()->warn("dlock: master '{}' moved from {} to {} ({})", options_.masterName, previous->text,
                             now->text, why);
      releases_.reconnect();  // waiters wake and try again on the new master
    }
    return now;
  }

  // Caller holds mutex_.
  void forgetDemoted(const detail::MasterAddress& address) {
    const auto named = [&](const auto& entry) { return entry.first == address; };
    demoted_.erase(std::remove_if(demoted_.begin(), demoted_.end(), named), demoted_.end());
  }

  // Masters a sentinel may still name though they are being, or were just, failed over.
  // Caller holds mutex_.
  std::vector<detail::MasterAddress> staleMasters() {
    const auto now = Steady::now();
    const auto expired = [&](const auto& entry) { return entry.second <= now; };
    demoted_.erase(std::remove_if(demoted_.begin(), demoted_.end(), expired), demoted_.end());
    std::vector<detail::MasterAddress> stale;
    for (const auto& entry : demoted_) stale.push_back(entry.first);
    if (failover_ && !failover_->gaveUp) stale.push_back(failover_->from);
    return stale;
  }

  // True when `node` answers ROLE with master; `probe` is kept across calls to the same node.
  bool isMaster(const detail::MasterAddress& node, std::unique_ptr<detail::Connection>& probe) {
    try {
      if (!probe || probe->broken() || probe->address() != node.address()) {
        probe = std::make_unique<detail::Connection>(resolver_.dataOptions(node));
      }
      return detail::roleIn(*probe->command({"ROLE"})) == "master";
    } catch (const LockError&) {
      probe.reset();
      return false;
    }
  }

  // The promotion thread: while a promotion is announced, polls ROLE on the replica and moves
  // there as soon as it is a master — before the sentinels name it, which they do only after
  // their next INFO of it. Gives the promotion up after kPromotionWait. Its own thread, so the
  // sentinel's next events (an abort) are not held up behind the polling.
  void watchPromotions() {
    std::unique_ptr<detail::Connection> probe;
    std::unique_lock<std::mutex> guard(mutex_);
    while (true) {
      changed_.wait(guard, [&] { return stopping_ || (failover_ && !failover_->gaveUp); });
      if (stopping_) return;
      const Failover failover = *failover_;
      if (Steady::now() >= failover.until) {
        failover_->gaveUp = true;
        guard.unlock();
        changed_.notify_all();
        detail::logger()->warn("dlock: the sentinels announced {} as the new master '{}', but it was not a master "
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

  // The sentinels' failover events (see SentinelEvents.h), on the thread of the sentinel that
  // spoke.
  void onEvent(const detail::SentinelEvent& event) noexcept {
    try {
      using Kind = detail::SentinelEvent::Kind;
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
            if (master_ && master_->address == event.to) return;  // moved already
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
          std::unique_ptr<detail::Connection> probe;
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
        detail::logger()->debug("dlock: after a sentinel event for master '{}': {}", options_.masterName, error.what());
      } catch (...) {
      }
    } catch (...) {
    }
  }

  // Runs `call(connection, master)` on the master. A failure before the command can have run
  // (no connection; a server-unavailable reply such as READONLY; a pooled connection found dead)
  // is retried once on the master the sentinels name now, when it moved (or, for a dead pooled
  // connection, on the same one). Any other failure is a ConnectionError after the sentinels
  // were asked again. The pool's own retry is not used: whether the failure came from connecting
  // decides the retry here. `operation` and `key` name the call in messages.
  template <class Call>
  auto run(const char* operation, std::string_view key, Call&& call)
      -> decltype(call(std::declval<detail::Connection&>(), std::declval<const Master&>())) {
    MasterPtr master = usable(operation, key);
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
            return call(**handle, *master);
          } catch (const detail::ServerUnavailableError& error) {
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
        (void)resolve(Reason::Failure, master.get());
        next = usable(operation, key);
      } catch (const LockError& error) {
        resolveError = error.what();
      }
      if (attempt == 0 && ((unsent && next != master) || stale)) {
        master = next;
        continue;
      }
      if (!resolveError.empty()) failure += "; then " + withoutPrefix(resolveError);
      throw ConnectionError(failure);
    }
  }

  // run() with `key`'s names and a reply source naming the master: `call(connection, names,
  // source)`.
  template <class Call>
  auto on(const char* operation, std::string_view key, Call&& call) {
    const detail::KeyNames names = detail::keyNames(options_.keyPrefix, key);
    return run(operation, key, [&](detail::Connection& connection, const Master& master) {
      return call(connection, names, detail::ReplySource(operation, key, master.label));
    });
  }

  // After an acquire on `connection`: WAIT for the replicas. With too few, releases the key and
  // throws ConnectionError; when WAIT is refused (an ACL without it), releases the key and throws
  // BackendError (ConnectionError for a "not now" reply). Either message says whether the release
  // worked. Never a ServerUnavailableError, which would say that nothing ran.
  void awaitReplicas(detail::Connection& connection, const detail::KeyNames& names, std::string_view token,
                     const detail::ReplySource& where) {
    const std::string replicas = std::to_string(options_.waitReplicas);
    const std::string timeout = std::to_string(options_.waitTimeout.count());
    connection.setReadTimeout(options_.waitTimeout + options_.connection.commandTimeout);
    const detail::ReplyPtr reply = connection.command({"WAIT", replicas, timeout});
    connection.setReadTimeout(options_.connection.commandTimeout);
    if (reply->type == REDIS_REPLY_ERROR) {
      const std::string message = "dlock: " + where.text() + ": WAIT refused after the acquire: " +
                                  std::string(detail::replyText(*reply)) + "; " +
                                  releaseAfterAcquire(connection, names, token, where);
      if (detail::isTransientErrorReply(*reply)) throw ConnectionError(message);
      throw BackendError(message);
    }
    const std::uint64_t acknowledged = detail::readCountReply(*reply, where);
    if (acknowledged >= options_.waitReplicas) return;
    throw ConnectionError("dlock: " + where.text() + ": only " + std::to_string(acknowledged) + " of " + replicas +
                          " replicas acknowledged the lock within " + timeout + " ms; " +
                          releaseAfterAcquire(connection, names, token, where));
  }

  // Releases a key just acquired on `connection`; says how that went, for a message.
  static std::string releaseAfterAcquire(detail::Connection& connection, const detail::KeyNames& names,
                                         std::string_view token, const detail::ReplySource& where) {
    try {
      if (detail::releaseOn(connection, names, token, nullptr, where).released) return "released it";
      return "it had ended already";
    } catch (const LockError& error) {
      return "could not release it; it ends at its TTL (" + withoutPrefix(error.what()) + ")";
    }
  }

  const SentinelOptions options_;
  detail::MasterResolver resolver_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;               // master_, failover_ or stopping_ changed
  MasterPtr master_;                              // guarded by mutex_
  std::optional<Failover> failover_;              // guarded by mutex_
  std::vector<std::pair<detail::MasterAddress, Steady::time_point>> demoted_;  // guarded by mutex_; until when
  std::optional<Steady::time_point> resolvedAt_;  // guarded by mutex_; when the last resolution ended
  std::exception_ptr lastError_;                  // guarded by mutex_; why it failed, if it did
  bool stopping_ = false;                         // guarded by mutex_
  std::mutex resolveMutex_;                       // one resolution or move at a time; taken before mutex_
  std::atomic<std::uint64_t> switches_{0};
  std::atomic<std::uint64_t> retiredReconnects_{0};  // of the pools of earlier masters

  // Last: their threads use the members above (see ~Connected).
  std::thread promotions_;         // watchPromotions()
  detail::SentinelEvents events_;  // failover events, from every sentinel
  detail::Subscriber releases_;    // release messages, on the master now
};

}  // namespace

class SentinelOperator::Impl {
 public:
  explicit Impl(SentinelOptions options)
      : connected_([options = std::move(options)] { return std::make_shared<Connected>(options); }) {}

  // This process's master, subscriptions and threads.
  Connected& here() const { return *connected_; }

 private:
  detail::ForkLocal<Connected> connected_;
};

SentinelOperator::SentinelOperator(SentinelOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

SentinelOperator::~SentinelOperator() = default;

AcquireResult SentinelOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  Connected& here = impl_->here();
  return here.on("lock", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    const AcquireResult result = detail::acquireOn(c, names, token, ttl, source);
    if (result.acquired && here.options_.waitReplicas > 0) here.awaitReplicas(c, names, token, source);
    return result;
  });
}

ReleaseResult SentinelOperator::unlock(std::string_view key, std::string_view token) {
  Connected& here = impl_->here();
  detail::ReleaseTries tries;  // run() tries again after a pooled connection failed
  return here.on("unlock", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::releaseOn(c, names, token, &here.releases_, source, &tries);
  });
}

bool SentinelOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  Connected& here = impl_->here();
  return here.on("extend", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::extendOn(c, names, token, ttl, source);
  });
}

std::vector<ExtendResult> SentinelOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  if (leases.empty()) return {};
  Connected& here = impl_->here();
  const std::string what = "(" + std::to_string(leases.size()) + " leases)";
  return here.run("extend", leases.front().key, [&](detail::Connection& c, const Connected::Master& master) {
    return detail::extendManyOn(c, here.options_.keyPrefix, leases, ttl,
                                detail::ReplySource("extend", what, master.label));
  });
}

std::uint64_t SentinelOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  Connected& here = impl_->here();
  return here.on("raiseFence", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::raiseFenceOn(c, names, atLeast, source);
  });
}

std::unique_ptr<IReleaseWatch> SentinelOperator::watch(std::string_view key) {
  Connected& here = impl_->here();
  (void)here.current();  // the subscriber's target is the master: find it first
  return here.releases_.watch(detail::keyNames(here.options_.keyPrefix, key).channel());
}

LeaseInfo SentinelOperator::inspect(std::string_view key) {
  Connected& here = impl_->here();
  return here.on("inspect", key, [&](detail::Connection& c, const detail::KeyNames& names, const auto& source) {
    return detail::inspectOn(c, names, source);
  });
}

std::string SentinelOperator::describe() const {
  Connected& here = impl_->here();
  std::string text = "redis+sentinel://" + here.resolver_.sentinelList() + "/" + here.options_.masterName;
  const std::string master = masterAddress();
  if (!master.empty()) text += " (master " + master + ")";
  return text;
}

std::string SentinelOperator::masterAddress() const {
  Connected& here = impl_->here();
  std::lock_guard<std::mutex> guard(here.mutex_);
  return here.master_ ? here.master_->text : std::string();
}

std::uint64_t SentinelOperator::masterSwitches() const noexcept {
  try {
    return impl_->here().switches_.load(std::memory_order_relaxed);
  } catch (...) {  // a forked child could not set up its own state yet: no switch seen
    return 0;
  }
}

std::uint64_t SentinelOperator::reconnects() const noexcept {
  try {
    Connected& here = impl_->here();
    std::uint64_t total = here.retiredReconnects_.load(std::memory_order_relaxed) + here.releases_.reconnects() +
                          here.events_.reconnects();
    std::lock_guard<std::mutex> guard(here.mutex_);
    if (here.master_) total += here.master_->pool->reconnects();
    return total;
  } catch (...) {
    return 0;
  }
}

}  // namespace dlock
