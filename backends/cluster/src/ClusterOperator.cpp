#include "dlock/cluster/ClusterOperator.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "ClusterReplies.h"
#include "ConnectionPool.h"
#include "Errors.h"
#include "Replies.h"
#include "Scripts.h"
#include "Subscriber.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"

namespace dlock {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr unsigned kMaxRedirects = 16;
constexpr milliseconds kFirstBackoff{5};
constexpr milliseconds kMaxBackoff{100};
// A watch that could not follow its slot to a new owner sleeps this long before the waiter retries.
constexpr milliseconds kRewatchPause{100};

// One node of the cluster, master or not: its pool and, once a waiter watched a key there, its
// release subscriber. Never destroyed before the operator, so the router hands out plain pointers.
struct Node {
  Node(const ConnectionOptions& connection, const PoolOptions& poolOptions) : pool(connection, poolOptions) {}

  [[nodiscard]] const std::string& name() const noexcept { return pool.address(); }  // "host:port"
  [[nodiscard]] const std::string& host() const noexcept { return pool.connectionOptions().host; }

  detail::ConnectionPool pool;
  // Guarded by the operator's mutex_; dropped (retired) when the node no longer serves a slot.
  std::shared_ptr<detail::Subscriber> subscriber;
};

// One script call of the lock protocol, and what it is for (messages).
struct ScriptCall {
  const char* operation;
  std::string_view key;
  const detail::Script& script;
  detail::Argv keys;
  detail::Argv args;
};

// A reply that is not a redirection, the node that sent it and, when asked for, that node's
// release subscriber (null if it has none).
struct Answer {
  detail::ReplyPtr reply;
  Node* node = nullptr;
  std::shared_ptr<detail::Subscriber> subscriber;
  bool cutOff = false;  // an earlier try failed on a connection after it may have run
};

// Sleeps out the next back-off step, never past `deadline`; false when the deadline has passed.
bool backOff(Steady::time_point deadline, milliseconds& backoff) {
  const auto now = Steady::now();
  if (now >= deadline) return false;
  std::this_thread::sleep_for(std::min<Steady::duration>(backoff, deadline - now));
  backoff = std::min(backoff * 2, kMaxBackoff);
  return true;
}

// Error replies after which the slot map is worth asking again: the node or the slot changed role.
bool suggestsNewTopology(const redisReply& reply) {
  return detail::isErrorReply(reply, "CLUSTERDOWN") || detail::isErrorReply(reply, "READONLY") ||
         detail::isErrorReply(reply, "MASTERDOWN") || detail::isErrorReply(reply, "LOADING");
}

std::string validPrefix(std::string prefix) {
  if (prefix.find_first_of("{}") != std::string::npos) {
    throw ConfigError("dlock: ClusterOptions::keyPrefix " + detail::quoteKey(prefix) +
                      " contains '{' or '}', which would capture the hash tag of every key");
  }
  return prefix;
}

// What one process owns: the slot map, the nodes with their pools and subscribers. Shared with
// outstanding watches. A forked child makes its own at its first call and never touches the
// parent's.
class Connected {
 public:
  struct Route {
    Node* node = nullptr;       // the slot's master in the map; null when none serves it
    std::uint64_t version = 0;  // the map it came from
    std::shared_ptr<detail::Subscriber> subscriber;  // node's, when asked for
  };
  struct Subscription {
    std::unique_ptr<IReleaseWatch> watch;
    Node* node = nullptr;
  };

  explicit Connected(ClusterOptions options);
  Connected(const Connected&) = delete;
  Connected& operator=(const Connected&) = delete;
  ~Connected() = default;

  // Runs `call` on the master of `slot`, following redirections and retrying transient errors
  // (see the header). Any reply but a redirection is returned, error replies included; with
  // `withSubscriber`, also the answering node's subscriber, read under the routing lock.
  Answer execute(std::uint16_t slot, const ScriptCall& call, bool withSubscriber = false);

  // The slot's master from the map (and its subscriber), asking the cluster first when there is
  // no map yet. One lock.
  Route route(std::uint16_t slot, bool withSubscriber = false);
  // The masters of `slots`, in order (null where none), under one lock.
  std::vector<Node*> owners(const std::vector<std::uint16_t>& slots);
  // Asks the cluster for the map unless it changed since `seen` (another call refreshed it).
  void refresh(std::uint64_t seen);
  void refreshQuietly(std::uint64_t seen) noexcept;
  // After a failure on `route`: true when a refreshed map names another master for the slot.
  bool ownerChanged(std::uint16_t slot, const Route& route);
  // MOVED from a node we found through map `seen`: the whole map is asked again (other slots have
  // probably moved too), then the slot is given to `target`, which is newer than any node's view
  // that has not caught up yet.
  void moved(const detail::Redirect& redirect, std::uint64_t seen);
  // The node at `address`, made (with its pool) on first sight.
  Node* nodeAt(const detail::NodeAddress& address);
  Node* ownerOf(std::uint16_t slot) const;
  std::uint64_t version() const;
  std::uint64_t reconnects() const;

  // A confirmed sharded subscription to `channel` on the master of `slot`.
  Subscription subscribe(std::uint16_t slot, const std::string& channel);
  // True while `subscription` still listens where releases of `slot` are published: its node
  // serves the slot in our map and still holds the channel (a node drops the channels of a slot
  // it hands over).
  bool listening(const Subscription& subscription, std::uint16_t slot, const std::string& channel) const;

  std::string where(const char* operation, std::string_view key, const Node& node) const {
    return std::string(operation) + " " + detail::quoteKey(key) + " on " + node.name();
  }

  const std::string prefix_;
  const ConnectionOptions connection_;
  const PoolOptions pool_;
  const milliseconds budget_;
  std::string describe_;
  std::atomic<std::uint64_t> refreshes_{0};

 private:
  Node* nodeAtLocked(const detail::NodeAddress& address);
  std::shared_ptr<detail::Subscriber> subscriberOf(Node* node) const;
  // The node's subscriber, made on first use.
  std::shared_ptr<detail::Subscriber> subscriberFor(Node* node);
  void apply(const std::vector<detail::SlotRange>& ranges, const Node& source);
  // Calls `read()` under mutex_ once there is a map, asking the cluster for one first if need be.
  template <class Read>
  auto readMap(Read read);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;  // guarded by mutex_; by "host:port", never erased
  std::vector<Node*> seeds_;                            // fixed after construction
  std::vector<Node*> slots_;                            // guarded by mutex_; kClusterSlots entries
  std::uint64_t version_ = 0;                           // guarded by mutex_; maps applied
  // Reconnects of subscribers dropped with their master, so that reconnects() never goes down.
  std::uint64_t retiredReconnects_ = 0;  // guarded by mutex_
  std::mutex refreshMutex_;              // one CLUSTER SLOTS at a time
};

// A release watch that follows its slot: when the map names another master for it, it
// subscribes there and reports a possible release (one may have gone to the new master).
class ClusterWatch final : public IReleaseWatch {
 public:
  ClusterWatch(std::shared_ptr<Connected> impl, std::uint16_t slot, std::string channel,
               Connected::Subscription subscription)
      : impl_(std::move(impl)), slot_(slot), channel_(std::move(channel)), current_(std::move(subscription)) {}

  bool waitForRelease(milliseconds timeout) override {
    if (current_.watch == nullptr || !impl_->listening(current_, slot_, channel_)) {
      // The slot has another owner in our map, or the node dropped the channel (it handed the
      // slot over; our map may not know yet, and SSUBSCRIBE there meets MOVED), or the
      // connection is being renewed: subscribe again, and report a possible release.
      current_.watch.reset();
      try {
        current_ = impl_->subscribe(slot_, channel_);
      } catch (const LockError& error) {
        // The waiter's next attempt meets the same trouble and reports it; do not spin.
        detail::logger()->debug("dlock: release watch on slot {} not moved yet: {}", slot_, error.what());
        std::this_thread::sleep_for(std::min(timeout, kRewatchPause));
      }
      return true;
    }
    return current_.watch->waitForRelease(timeout);
  }

 private:
  const std::shared_ptr<Connected> impl_;
  const std::uint16_t slot_;
  const std::string channel_;
  Connected::Subscription current_;
};

}  // namespace

Connected::Connected(ClusterOptions options)
    : prefix_(validPrefix(std::move(options.keyPrefix))),
      connection_(options.connection),
      pool_(options.pool),
      budget_(options.retryBudget.value_or(options.connection.commandTimeout)),
      slots_(kClusterSlots, nullptr) {
  if (options.seeds.empty()) throw ConfigError("dlock: ClusterOptions::seeds is empty; give at least one node");
  if (connection_.db != 0) {
    throw ConfigError("dlock: ClusterOptions::connection.db is " + std::to_string(connection_.db) +
                      "; a cluster has only database 0");
  }
  if (pool_.size == 0) throw ConfigError("dlock: ClusterOptions::pool.size must be at least 1");
  if (budget_.count() <= 0) throw ConfigError("dlock: ClusterOptions::retryBudget must be positive");
  describe_ = "redis+cluster://";
  for (const auto& seed : options.seeds) {
    if (seed.host.empty() || seed.port <= 0 || seed.port > 65535) {
      throw ConfigError("dlock: ClusterOptions::seeds has an invalid address '" + seed.host + ":" +
                        std::to_string(seed.port) + "'");
    }
    Node* node = nodeAtLocked(detail::NodeAddress{seed.host, seed.port});
    if (std::find(seeds_.begin(), seeds_.end(), node) == seeds_.end()) {
      if (!seeds_.empty()) describe_ += ",";
      describe_ += node->name();
      seeds_.push_back(node);
    }
  }
}

Node* Connected::nodeAtLocked(const detail::NodeAddress& address) {
  auto& node = nodes_[address.text()];
  if (!node) {
    ConnectionOptions options = connection_;
    options.host = address.host;
    options.port = address.port;
    node = std::make_unique<Node>(options, pool_);
  }
  return node.get();
}

Node* Connected::nodeAt(const detail::NodeAddress& address) {
  std::lock_guard<std::mutex> guard(mutex_);
  return nodeAtLocked(address);
}

Node* Connected::ownerOf(std::uint16_t slot) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return slots_[slot];
}

std::uint64_t Connected::version() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return version_;
}

std::uint64_t Connected::reconnects() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::uint64_t total = retiredReconnects_;
  for (const auto& [name, node] : nodes_) {
    total += node->pool.reconnects();
    if (node->subscriber) total += node->subscriber->reconnects();
  }
  return total;
}

template <class Read>
auto Connected::readMap(Read read) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (version_ > 0) return read();
  }
  refresh(0);
  std::lock_guard<std::mutex> guard(mutex_);
  return read();
}

Connected::Route Connected::route(std::uint16_t slot, bool withSubscriber) {
  return readMap([&] {
    Node* node = slots_[slot];
    return Route{node, version_, withSubscriber && node != nullptr ? node->subscriber : nullptr};
  });
}

std::vector<Node*> Connected::owners(const std::vector<std::uint16_t>& slots) {
  return readMap([&] {
    std::vector<Node*> found;
    found.reserve(slots.size());
    for (const std::uint16_t slot : slots) found.push_back(slots_[slot]);
    return found;
  });
}

void Connected::refresh(std::uint64_t seen) {
  std::lock_guard<std::mutex> single(refreshMutex_);
  std::vector<Node*> candidates;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (version_ != seen) return;  // refreshed meanwhile by another call
    // The masters we know first, then the seeds, then every other node we have heard of.
    const auto add = [&](Node* node) {
      if (node != nullptr && std::find(candidates.begin(), candidates.end(), node) == candidates.end()) {
        candidates.push_back(node);
      }
    };
    Node* previous = nullptr;
    for (Node* node : slots_) {  // in runs: one look-up per range, not per slot
      if (node != previous) add(node);
      previous = node;
    }
    for (Node* node : seeds_) add(node);
    for (const auto& [name, node] : nodes_) add(node.get());
  }
  std::string failures;
  bool unreachable = false;
  Node* servesNothing = nullptr;  // a node that answered with no slots at all
  for (Node* node : candidates) {
    const std::string where = "CLUSTER SLOTS on " + node->name();
    try {
      auto ranges = node->pool.run([&](detail::Connection& connection) {
        const detail::ReplyPtr reply = connection.command({"CLUSTER", "SLOTS"});
        if (reply->type == REDIS_REPLY_ERROR) detail::throwReplyError(*reply, where);
        return detail::parseClusterSlots(*reply, node->host(), where);
      });
      if (ranges.empty()) {
        // A node that was reset or has not joined yet; another may know better.
        failures += "; " + node->name() + ": serves no slots";
        servesNothing = node;
        continue;
      }
      apply(ranges, *node);
      return;
    } catch (const ConnectionError& error) {
      unreachable = true;
      failures += std::string("; ") + error.what();
    } catch (const BackendError& error) {
      failures += std::string("; ") + error.what();
    }
  }
  if (servesNothing != nullptr && !unreachable) {
    // Every node we reached agrees that no slot has an owner: that is the map. Calls then wait for
    // owners within their retry budget and end in ConnectionError, as for any unowned slot (the
    // server itself answers CLUSTERDOWN, a "not now" reply, meanwhile).
    apply({}, *servesNothing);
    return;
  }
  const std::string message = "dlock: no node of " + describe_ + " gave a slot map" + failures;
  if (unreachable) throw ConnectionError(message);
  throw BackendError(message);  // only replies dlock cannot use: NOPERM, cluster support disabled, ...
}

void Connected::refreshQuietly(std::uint64_t seen) noexcept {
  try {
    refresh(seen);
  } catch (const std::exception& error) {
    try {
      detail::logger()->debug("dlock: refreshing the slot map of {} failed: {}", describe_, error.what());
    } catch (...) {
    }
  }
}

void Connected::apply(const std::vector<detail::SlotRange>& ranges, const Node& source) {
  std::vector<std::shared_ptr<detail::Subscriber>> retired;  // destroyed outside the lock
  std::size_t moved = 0;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<Node*> fresh(kClusterSlots, nullptr);
    std::vector<Node*> masters;
    for (const auto& range : ranges) {
      Node* master = nodeAtLocked(range.master);
      std::fill(fresh.begin() + range.first, fresh.begin() + range.last + 1, master);
      if (std::find(masters.begin(), masters.end(), master) == masters.end()) masters.push_back(master);
    }
    for (std::size_t slot = 0; slot < kClusterSlots; ++slot) {
      if (fresh[slot] != slots_[slot]) ++moved;
    }
    slots_.swap(fresh);
    ++version_;
    for (const auto& [name, node] : nodes_) {
      if (node->subscriber && std::find(masters.begin(), masters.end(), node.get()) == masters.end()) {
        retiredReconnects_ += node->subscriber->reconnects();
        retired.push_back(std::move(node->subscriber));
        node->subscriber.reset();
      }
    }
  }
  refreshes_.fetch_add(1, std::memory_order_relaxed);
  if (moved > 0 && refreshes_.load(std::memory_order_relaxed) > 1) {
    detail::logger()->info("dlock: the slot map of {} changed ({} slots moved; map from {})", describe_, moved,
                           source.name());
  }
}

bool Connected::ownerChanged(std::uint16_t slot, const Route& route) {
  refreshQuietly(route.version);
  Node* now = ownerOf(slot);
  return now != nullptr && now != route.node;
}

Answer Connected::execute(std::uint16_t slot, const ScriptCall& call, bool withSubscriber) {
  const auto deadline = Steady::now() + budget_;
  milliseconds backoff = kFirstBackoff;
  unsigned redirects = 0;
  Node* askTarget = nullptr;
  bool cutOff = false;
  while (true) {
    Route current;
    const bool asking = askTarget != nullptr;
    if (asking) {
      current.node = askTarget;
      if (withSubscriber) current.subscriber = subscriberOf(askTarget);
      askTarget = nullptr;
    } else {
      current = route(slot, withSubscriber);
    }
    if (current.node == nullptr) {
      // No master serves the slot in our map (being reassigned): wait for one within the budget.
      if (!backOff(deadline, backoff)) {
        throw ConnectionError("dlock: " + std::string(call.operation) + " " + detail::quoteKey(call.key) + " on " +
                              describe_ + ": no node serves slot " + std::to_string(slot) + " (retried for " +
                              std::to_string(budget_.count()) + " ms)");
      }
      refreshQuietly(current.version);
      continue;
    }
    Node& node = *current.node;
    detail::ReplyPtr reply;
    try {
      reply = node.pool.run([&](detail::Connection& connection) {
        try {
          return asking ? detail::runScriptAsking(connection, call.script, call.keys, call.args)
                        : detail::runScript(connection, call.script, call.keys, call.args);
        } catch (const ConnectionError&) {
          cutOff = true;  // the pool or the failover path below may send it again
          throw;
        }
      });
    } catch (const ConnectionError&) {
      // The master may be gone and its replica promoted: follow the slot if the map says so.
      if (asking || Steady::now() >= deadline || !ownerChanged(slot, current)) throw;
      continue;
    }
    if (reply->type != REDIS_REPLY_ERROR) return Answer{std::move(reply), &node, std::move(current.subscriber), cutOff};
    if (const auto redirect = detail::parseRedirect(*reply, node.host())) {
      if (++redirects > kMaxRedirects) {
        throw ConnectionError("dlock: " + where(call.operation, call.key, node) + ": more than " +
                              std::to_string(kMaxRedirects) +
                              " redirections, the last: " + std::string(detail::replyText(*reply)));
      }
      if (redirect->ask) {
        askTarget = nodeAt(redirect->target);
      } else {
        moved(*redirect, current.version);
      }
      continue;
    }
    if (detail::isTransientErrorReply(*reply)) {
      if (suggestsNewTopology(*reply)) refreshQuietly(current.version);
      if (backOff(deadline, backoff)) continue;
    }
    return Answer{std::move(reply), &node, std::move(current.subscriber), cutOff};  // the reply reader maps the error
  }
}

void Connected::moved(const detail::Redirect& redirect, std::uint64_t seen) {
  refreshQuietly(seen);
  std::lock_guard<std::mutex> guard(mutex_);
  slots_[redirect.slot] = nodeAtLocked(redirect.target);
}

std::shared_ptr<detail::Subscriber> Connected::subscriberOf(Node* node) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return node->subscriber;
}

std::shared_ptr<detail::Subscriber> Connected::subscriberFor(Node* node) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!node->subscriber) {
    detail::SubscriberOptions options;
    options.sharded = true;
    node->subscriber = std::make_shared<detail::Subscriber>(
        [target = node->pool.connectionOptions()] { return target; }, pool_, options);
  }
  return node->subscriber;
}

bool Connected::listening(const Subscription& subscription, std::uint16_t slot,
                                      const std::string& channel) const {
  std::shared_ptr<detail::Subscriber> subscriber;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (slots_[slot] != subscription.node) return false;
    subscriber = subscription.node->subscriber;
  }
  return subscriber != nullptr && subscriber->subscribed(channel);
}

Connected::Subscription Connected::subscribe(std::uint16_t slot, const std::string& channel) {
  unsigned redirects = 0;
  bool followedFailover = false;
  while (true) {
    Route current = route(slot);
    if (current.node == nullptr) {
      refresh(current.version);
      current = route(slot);
      if (current.node == nullptr) {
        throw ConnectionError("dlock: no node of " + describe_ + " serves slot " + std::to_string(slot));
      }
    }
    try {
      return Subscription{subscriberFor(current.node)->watch(channel), current.node};
    } catch (const detail::ServerReplyError& error) {
      // Refused for this channel only; the subscriber asks again on the next watch().
      const auto redirect = detail::parseRedirect(error.reply(), current.node->host());
      if (!redirect) throw;  // NOPERM and the like
      if (redirect->ask || ++redirects > kMaxRedirects) {
        // A slot half-migrated: a subscription cannot follow ASK. Not now, as for commands.
        throw ConnectionError("dlock: SSUBSCRIBE " + detail::quoteKey(channel) + " on " + current.node->name() +
                              ": the slot is moving: " + error.reply());
      }
      moved(*redirect, current.version);
    } catch (const ConnectionError&) {
      // Unreachable, or "not now" (TRYAGAIN, CLUSTERDOWN...): follow a failover once.
      if (followedFailover || !ownerChanged(slot, current)) throw;
      followedFailover = true;
    }
  }
}

class ClusterOperator::Impl {
 public:
  explicit Impl(ClusterOptions options)
      : connected_([options = std::move(options)] { return std::make_shared<Connected>(options); }) {}

  // This process's slot map, nodes and subscribers.
  Connected& here() const { return *connected_; }
  [[nodiscard]] const std::shared_ptr<Connected>& shared() const { return connected_.shared(); }

 private:
  detail::ForkLocal<Connected> connected_;
};

ClusterOperator::ClusterOperator(ClusterOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

ClusterOperator::~ClusterOperator() = default;

AcquireResult ClusterOperator::lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  Connected& here = impl_->here();
  const ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  const std::string ttlText = std::to_string(ttl.count());
  const Answer answer =
      here.execute(names.slot, {"lock", key, detail::acquireScript(), {names.lock, names.fence}, {token, ttlText}});
  return detail::readAcquireReply(*answer.reply, here.where("lock", key, *answer.node));
}

ReleaseResult ClusterOperator::unlock(std::string_view key, std::string_view token) {
  Connected& here = impl_->here();
  const ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  const Answer answer = here.execute(
      names.slot, {"unlock", key, detail::shardedReleaseScript(), {names.lock}, {token, names.channel}}, true);
  ReleaseResult result = detail::readReleaseReply(*answer.reply, here.where("unlock", key, *answer.node));
  // Our own subscriber is not a waiter of another process.
  if (result.notified > 0 && answer.subscriber && answer.subscriber->subscribed(names.channel)) --result.notified;
  result.inDoubt = !result.released && answer.cutOff;
  return result;
}

bool ClusterOperator::extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) {
  Connected& here = impl_->here();
  const ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  const std::string ttlText = std::to_string(ttl.count());
  const Answer answer =
      here.execute(names.slot, {"extend", key, detail::extendScript(), {names.lock}, {token, ttlText}});
  return detail::readFlagReply(*answer.reply, here.where("extend", key, *answer.node));
}

std::vector<ExtendResult> ClusterOperator::extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) {
  Connected& here = impl_->here();
  std::vector<ExtendResult> extended(leases.size());
  if (leases.empty()) return extended;
  const std::string ttlText = std::to_string(ttl.count());
  std::vector<std::string> lockKeys;
  std::vector<std::uint16_t> slots;
  lockKeys.reserve(leases.size());
  slots.reserve(leases.size());
  for (const auto& lease : leases) {
    ClusterKeyNames names = clusterKeyNames(here.prefix_, lease.key);
    lockKeys.push_back(std::move(names.lock));
    slots.push_back(names.slot);
  }
  const std::vector<Node*> owners = here.owners(slots);
  std::map<Node*, std::vector<std::size_t>> byNode;
  std::vector<std::size_t> oneByOne;  // leases the batch could not settle: the routed path retries them
  for (std::size_t i = 0; i < leases.size(); ++i) {
    if (owners[i] == nullptr) {
      oneByOne.push_back(i);
    } else {
      byNode[owners[i]].push_back(i);
    }
  }
  for (const auto& [node, indexes] : byNode) {
    std::vector<std::pair<detail::Argv, detail::Argv>> calls;
    calls.reserve(indexes.size());
    for (const std::size_t i : indexes) calls.push_back({{lockKeys[i]}, {leases[i].token, ttlText}});
    std::vector<detail::ReplyPtr> replies;
    try {
      replies = node->pool.run([&](detail::Connection& connection) {
        return detail::runScriptPipelined(connection, detail::extendScript(), calls);
      });
    } catch (const ConnectionError&) {
      oneByOne.insert(oneByOne.end(), indexes.begin(), indexes.end());
      continue;
    }
    for (std::size_t j = 0; j < indexes.size(); ++j) {
      const redisReply& reply = *replies[j];
      const std::size_t i = indexes[j];
      if (detail::parseRedirect(reply, node->host()) || detail::isTransientErrorReply(reply)) {
        oneByOne.push_back(i);
      } else {
        extended[i].extended = detail::readFlagReply(reply, here.where("extend", leases[i].key, *node));
      }
    }
  }
  std::sort(oneByOne.begin(), oneByOne.end());
  for (const std::size_t i : oneByOne) extended[i].extended = extend(leases[i].key, leases[i].token, ttl);
  return extended;
}

std::uint64_t ClusterOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  Connected& here = impl_->here();
  const ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  const std::string wanted = std::to_string(atLeast);
  const Answer answer =
      here.execute(names.slot, {"raiseFence", key, detail::raiseFenceScript(), {names.fence}, {wanted}});
  return detail::readCountReply(*answer.reply, here.where("raiseFence", key, *answer.node));
}

std::unique_ptr<IReleaseWatch> ClusterOperator::watch(std::string_view key) {
  Connected& here = impl_->here();
  ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  Connected::Subscription subscription = here.subscribe(names.slot, names.channel);
  return std::make_unique<ClusterWatch>(impl_->shared(), names.slot, std::move(names.channel), std::move(subscription));
}

LeaseInfo ClusterOperator::inspect(std::string_view key) {
  Connected& here = impl_->here();
  const ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  const Answer answer =
      here.execute(names.slot, {"inspect", key, detail::inspectScript(), {names.lock, names.fence}, {}});
  return detail::readInspectReply(*answer.reply, here.where("inspect", key, *answer.node));
}

std::string ClusterOperator::describe() const { return impl_->here().describe_; }

void ClusterOperator::refreshSlots() {
  Connected& here = impl_->here();
  here.refresh(here.version());
}

std::string ClusterOperator::nodeFor(std::string_view key) {
  Connected& here = impl_->here();
  const ClusterKeyNames names = clusterKeyNames(here.prefix_, key);
  const Connected::Route route = here.route(names.slot);
  if (route.node == nullptr) {
    throw ConnectionError("dlock: no node of " + here.describe_ + " serves slot " + std::to_string(names.slot));
  }
  return route.node->name();
}

std::uint64_t ClusterOperator::reconnects() const noexcept {
  try {
    return impl_->here().reconnects();
  } catch (...) {  // a forked child could not set up its own state yet: none re-opened
    return 0;
  }
}

std::uint64_t ClusterOperator::slotRefreshes() const noexcept {
  try {
    return impl_->here().refreshes_.load(std::memory_order_relaxed);
  } catch (...) {
    return 0;
  }
}

}  // namespace dlock
