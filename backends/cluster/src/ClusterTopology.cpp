// SPDX-License-Identifier: Apache-2.0
#include "ClusterTopology.h"

#include <algorithm>
#include <thread>

#include "Errors.h"
#include "Reply.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr unsigned kMaxRedirects = 16;
constexpr milliseconds kMaxBackoff{100};

// Sleeps out the call's next back-off step, never past its deadline; false when that has passed.
bool backOff(Call& call) {
  const auto now = Steady::now();
  if (now >= call.deadline) return false;
  std::this_thread::sleep_for(std::min<Steady::duration>(call.backoff, call.deadline - now));
  call.backoff = std::min(call.backoff * 2, kMaxBackoff);
  return true;
}

// Error replies after which the slot map is worth asking again: the node or the slot changed role.
bool suggestsNewTopology(std::string_view error) {
  for (const std::string_view prefix : {"CLUSTERDOWN", "READONLY", "MASTERDOWN", "LOADING"}) {
    if (error.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace

ClusterTopology::ClusterTopology(const ClusterOptions& options)
    : connection_(options.connection),
      pool_(options.pool),
      budget_(options.retryBudget.value_or(options.connection.commandTimeout)),
      slots_(kClusterSlots, nullptr) {
  if (options.keyPrefix.find_first_of("{}") != std::string::npos) {
    throw ConfigError("dlock: ClusterOptions::keyPrefix " + quoteKey(options.keyPrefix) +
                      " contains '{' or '}', which would capture the hash tag of every key");
  }
  if (options.seeds.empty()) throw ConfigError("dlock: ClusterOptions::seeds is empty; give at least one node");
  if (connection_.db != 0) {
    throw ConfigError("dlock: ClusterOptions::connection.db is " + std::to_string(connection_.db) +
                      "; a cluster has only database 0");
  }
  if (pool_.size == 0) throw ConfigError("dlock: ClusterOptions::pool.size must be at least 1");
  if (budget_.count() <= 0) throw ConfigError("dlock: ClusterOptions::retryBudget must be positive");
  describe_ = connection_.tls.enabled ? "rediss+cluster://" : "redis+cluster://";
  for (const auto& seed : options.seeds) {
    if (seed.host.empty() || seed.port <= 0 || seed.port > 65535) {
      throw ConfigError("dlock: ClusterOptions::seeds has an invalid address '" + seed.host + ":" +
                        std::to_string(seed.port) + "'");
    }
    RedisNode* node = nodeAtLocked(NodeAddress{seed.host, seed.port});
    if (std::find(seeds_.begin(), seeds_.end(), node) == seeds_.end()) {
      if (!seeds_.empty()) describe_ += ",";
      describe_ += node->name();
      seeds_.push_back(node);
    }
  }
}

RedisNode* ClusterTopology::nodeAtLocked(const NodeAddress& address) {
  auto& node = nodes_[address.text()];
  if (!node) {
    ConnectionOptions options = connection_;
    options.host = address.host;
    options.port = address.port;
    node = std::make_unique<RedisNode>(options, pool_, true);
  }
  return node.get();
}

RedisNode* ClusterTopology::nodeAt(const NodeAddress& address) {
  std::lock_guard<std::mutex> guard(mutex_);
  return nodeAtLocked(address);
}

std::uint64_t ClusterTopology::version() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return version_;
}

std::uint64_t ClusterTopology::reconnects() const {
  std::lock_guard<std::mutex> guard(mutex_);
  std::uint64_t total = 0;
  for (const auto& [name, node] : nodes_) total += node->reconnects();
  return total;
}

RedisNode* ClusterTopology::ownerOf(std::uint16_t slot) { return owners({slot}).front(); }

std::vector<RedisNode*> ClusterTopology::owners(const std::vector<std::uint16_t>& slots) {
  std::unique_lock<std::mutex> guard(mutex_);
  if (version_ == 0) {
    guard.unlock();
    refresh(0);
    guard.lock();
  }
  std::vector<RedisNode*> found;
  found.reserve(slots.size());
  for (const std::uint16_t slot : slots) found.push_back(slots_[slot]);
  return found;
}

bool ClusterTopology::serves(const RedisNode* node, std::uint16_t slot) const {
  std::lock_guard<std::mutex> guard(mutex_);
  return slots_[slot] == node;
}

Route ClusterTopology::route(std::uint16_t slot, Call& call) {
  if (call.redirected != nullptr) {
    Route asked{call.redirected, slot, true, version()};
    call.redirected = nullptr;
    return asked;
  }
  while (true) {
    RedisNode* node = nullptr;
    std::uint64_t seen = 0;
    {
      std::unique_lock<std::mutex> guard(mutex_);  // one look at the map: the node and its version
      if (version_ == 0) {
        guard.unlock();
        refresh(0);
        guard.lock();
      }
      node = slots_[slot];
      seen = version_;
    }
    if (node != nullptr) return Route{node, slot, false, seen};
    // No master serves the slot in our map (being reassigned): wait for one within the budget.
    if (!backOff(call)) {
      throw ConnectionError("dlock: " + std::string(call.operation) + " " + quoteKey(call.key) + " on " + describe_ +
                            ": no node serves slot " + std::to_string(slot) + " (retried for " +
                            std::to_string(budget_.count()) + " ms)");
    }
    refreshQuietly(seen);
  }
}

bool ClusterTopology::retryAfterReply(const Route& route, std::string_view error, Call& call) {
  if (const auto redirect = parseRedirect(error, route.node->host())) {
    const std::string where = std::string(call.operation) + " " + quoteKey(call.key) + " on " + route.node->name();
    if (++call.redirects > kMaxRedirects) {
      throw ConnectionError("dlock: " + where + ": more than " + std::to_string(kMaxRedirects) +
                            " redirections, the last: " + std::string(error));
    }
    if (redirect->ask) {
      // A slot half-migrated: a subscription cannot follow ASK. Not now, as for commands.
      if (call.subscribing) throw ConnectionError("dlock: " + where + ": the slot is moving: " + std::string(error));
      call.redirected = nodeAt(redirect->target);
    } else {
      // The whole map is asked again (other slots have probably moved too), then the slot is
      // given to the node named, which is newer than any node's view that has not caught up yet.
      refreshQuietly(route.version);
      std::lock_guard<std::mutex> guard(mutex_);
      slots_[redirect->slot] = nodeAtLocked(redirect->target);
    }
    return true;
  }
  if (!isTransientErrorText(error)) return false;
  if (suggestsNewTopology(error)) refreshQuietly(route.version);
  return backOff(call);
}

bool ClusterTopology::retryAfterFailure(const Route& route, Failure /*failure*/, Call& call) {
  // The master may be gone and its replica promoted: follow the slot if the map says so.
  return !route.asking && Steady::now() < call.deadline && ownerChanged(route);
}

bool ClusterTopology::retryable(std::string_view error) const {
  return parseRedirect(error, "").has_value() || isTransientErrorText(error);
}

bool ClusterTopology::ownerChanged(const Route& route) {
  refreshQuietly(route.version);
  std::lock_guard<std::mutex> guard(mutex_);
  return slots_[route.slot] != nullptr && slots_[route.slot] != route.node;
}

void ClusterTopology::refresh(std::uint64_t seen) {
  std::lock_guard<std::mutex> single(refreshMutex_);
  std::vector<RedisNode*> candidates;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (version_ != seen) return;  // refreshed meanwhile by another call
    // The masters we know first, then the seeds, then every other node we have heard of.
    const auto add = [&](RedisNode* node) {
      if (node != nullptr && std::find(candidates.begin(), candidates.end(), node) == candidates.end()) {
        candidates.push_back(node);
      }
    };
    RedisNode* previous = nullptr;
    for (RedisNode* node : slots_) {  // in runs: one look-up per range, not per slot
      if (node != previous) add(node);
      previous = node;
    }
    for (RedisNode* node : seeds_) add(node);
    for (const auto& [name, node] : nodes_) add(node.get());
  }
  std::string failures;
  bool unreachable = false;
  RedisNode* servesNothing = nullptr;  // a node that answered with no slots at all
  for (RedisNode* node : candidates) {
    const std::string where = "CLUSTER SLOTS on " + node->name();
    try {
      auto ranges = node->pool().run([&](Connection& connection) {
        const ReplyPtr reply = connection.command({"CLUSTER", "SLOTS"});
        if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, where);
        return parseClusterSlots(*reply, node->host(), where);
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
    // owners within their retry budget and end in ConnectionError, as for any unowned slot.
    apply({}, *servesNothing);
    return;
  }
  const std::string message = "dlock: no node of " + describe_ + " gave a slot map" + failures;
  if (unreachable) throw ConnectionError(message);
  throw BackendError(message);  // only replies dlock cannot use: NOPERM, cluster support disabled, ...
}

void ClusterTopology::refreshQuietly(std::uint64_t seen) noexcept {
  try {
    refresh(seen);
  } catch (const std::exception& error) {
    try {
      logger()->debug("dlock: refreshing the slot map of {} failed: {}", describe_, error.what());
    } catch (...) {
    }
  }
}

void ClusterTopology::apply(const std::vector<SlotRange>& ranges, const RedisNode& source) {
  std::vector<RedisNode*> retired;  // lose their subscribers outside the lock
  std::size_t moved = 0;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<RedisNode*> fresh(kClusterSlots, nullptr);
    std::vector<RedisNode*> masters;
    for (const auto& range : ranges) {
      RedisNode* master = nodeAtLocked(range.master);
      std::fill(fresh.begin() + range.first, fresh.begin() + range.last + 1, master);
      if (std::find(masters.begin(), masters.end(), master) == masters.end()) masters.push_back(master);
    }
    for (std::size_t slot = 0; slot < kClusterSlots; ++slot) {
      if (fresh[slot] != slots_[slot]) ++moved;
    }
    slots_.swap(fresh);
    ++version_;
    for (const auto& [name, node] : nodes_) {
      if (std::find(masters.begin(), masters.end(), node.get()) == masters.end()) retired.push_back(node.get());
    }
  }
  for (RedisNode* node : retired) node->retireSubscriber();
  refreshes_.fetch_add(1, std::memory_order_relaxed);
  if (moved > 0 && refreshes_.load(std::memory_order_relaxed) > 1) {
    logger()->info("dlock: the slot map of {} changed ({} slots moved; map from {})", describe_, moved,
                   source.name());
  }
}

}  // namespace dlock::detail
