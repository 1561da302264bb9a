// SPDX-License-Identifier: Apache-2.0
#include "ClusterTopology.h"

#include <algorithm>

#include "redis/src/Errors.h"
#include "redis/src/Reply.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

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
  if (options.retryBudget.value_or(connection_.commandTimeout).count() <= 0) throw ConfigError("dlock: ClusterOptions::retryBudget must be positive");
  describe_ = connection_.tls.enabled ? "rediss+cluster://" : "redis+cluster://";
  for (const auto& seed : options.seeds) {
    if (seed.host.empty() || seed.port <= 0 || seed.port > 65535) {
      throw ConfigError("dlock: ClusterOptions::seeds has an invalid address '" + seed.host + ":" +
                        std::to_string(seed.port) + "'");
    }
    RedisNode* node = nodeAtLocked(NodeAddress{seed.host, seed.port});
    if (std::find(seeds_.begin(), seeds_.end(), node) == seeds_.end()) {
      if (!seeds_.empty()) describe_ += ",";
      describe_ += node->address();
      seeds_.push_back(node);
    }
  }
}

RedisNode* ClusterTopology::nodeAtLocked(const NodeAddress& address) {
  auto& node = nodes_[address.address()];
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

Route ClusterTopology::route(std::uint16_t slot) {
  RedisNode* node = nullptr;
  std::uint64_t seen = 0;
  for (int look = 0; look < 2 && node == nullptr; ++look) {
    if (look > 0) refreshQuietly(seen);  // no master serves the slot in our map: ask again once
    std::unique_lock<std::mutex> guard(mutex_);  // one look at the map: the node and its version
    if (version_ == 0) {
      guard.unlock();
      refresh(0);
      guard.lock();
    }
    node = slots_[slot];
    seen = version_;
  }
  if (node != nullptr) return Route{node, slot, false, seen, {}};
  return Route{nullptr, slot, false, seen, "no node serves slot " + std::to_string(slot)};  // being reassigned
}

Verdict ClusterTopology::afterReply(const Route& route, std::string_view error) {
  if (const auto redirect = parseRedirect(error, route.node->host())) {
    if (redirect->ask) return Verdict{Next::Redirected, Route{nodeAt(redirect->target), route.slot, true, version(), {}}, {}};
    // The whole map is asked again (other slots have probably moved too), then the slot is
    // given to the node named, which is newer than any node's view that has not caught up yet.
    refreshQuietly(route.version);
    std::lock_guard<std::mutex> guard(mutex_);
    slots_[redirect->slot] = nodeAtLocked(redirect->target);
    return Verdict{Next::Redirected, std::nullopt, {}};
  }
  if (!isTransientErrorText(error)) return {};
  if (suggestsNewTopology(error)) refreshQuietly(route.version);
  return Verdict{Next::Unchanged, std::nullopt, {}};
}

Verdict ClusterTopology::afterFailure(const Route& route, Failure /*failure*/) {
  // The master may be gone and its replica promoted: follow the slot if the map says so.
  if (!route.asking && ownerChanged(route)) return Verdict{Next::Moved, std::nullopt, {}};
  return {};
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
    const std::string where = "CLUSTER SLOTS on " + node->address();
    try {
      auto ranges = node->pool().run([&](Connection& connection) {
        const ReplyPtr reply = connection.command({"CLUSTER", "SLOTS"});
        if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, where);
        return parseClusterSlots(*reply, node->host(), where);
      });
      if (ranges.empty()) {
        // A node that was reset or has not joined yet; another may know better.
        failures += "; " + node->address() + ": serves no slots";
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
                   source.address());
  }
}

}  // namespace dlock::detail
