// SPDX-License-Identifier: Apache-2.0
// Topology.h — where a call of the lock protocol goes, and what a failure there means: the part
// that differs between one server, a Sentinel-watched master and a Cluster. RedisOperator asks it
// for a node before each try and, after a try that failed, what changed; whether to try again is
// RetryPolicy's to decide.
//
//   FixedTopology      one server: nothing ever moves
//   SentinelTopology   the master the sentinels name; follows failovers
//   ClusterTopology    the master of the key's slot; follows MOVED, ASK, TRYAGAIN, failovers
//
// Owner: one RedisOperator, per process. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "RedisNode.h"
#include "RetryPolicy.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

// Where one try goes.
struct Route {
  RedisNode* node = nullptr;  // null: no node serves the key now (`missing` says why)
  std::uint16_t slot = 0;     // the key's (0 where slots do not matter)
  bool asking = false;        // an ASK redirection: ASKING first, on the same connection
  std::uint64_t version = 0;  // the topology's view it came from, to tell whether it changed since
  std::string missing;
};

// What changed after a failed try, and where an ASK points (`via`, for the next try only).
struct Verdict {
  Next next = Next::Final;
  std::optional<Route> via;
  std::string note;  // why the topology could not recover, for the call's error
};

class Topology {
 public:
  Topology() = default;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  virtual ~Topology() = default;

  // The node for the next try on `slot` (node null when none is known now).
  virtual Route route(std::uint16_t slot) = 0;
  // After an error reply on `route`: what changed. Only RetryPolicy decides whether to try again.
  virtual Verdict afterReply(const Route& route, std::string_view error) = 0;
  // After a try on `route` without a reply: what changed.
  virtual Verdict afterFailure(const Route& route, Failure failure) = 0;
  // Waits out a retry's `pause`, returning early when the view moves past `version` (a topology
  // that hears of failovers as they happen); RetryPolicy chose the pause.
  // A cancel of the wait the call runs in ends the pause (Wakeup.h).
  virtual void awaitChange(std::uint64_t /*version*/, std::chrono::milliseconds pause) {
    (void)Wakeup::sleepFor(pause);
  }

  // True for an error reply that afterReply() could act on (a redirection, a "not now"): a
  // batch that meets one sends its calls again one by one.
  [[nodiscard]] virtual bool retryable(std::string_view error) const = 0;

  // The nodes serving `slots` now, null where none is known; one look at the topology.
  virtual std::vector<RedisNode*> owners(const std::vector<std::uint16_t>& slots) = 0;
  // True while `node` serves `slot`: a release watch there still hears its releases.
  [[nodiscard]] virtual bool serves(const RedisNode* node, std::uint16_t slot) const = 0;

  // A cluster: names and release messages are per slot (see KeyNames.h), one script per slot.
  [[nodiscard]] virtual bool sharded() const noexcept = 0;
  // The commands the topology itself sends the data nodes (a Sentinel's ROLE, a cluster's
  // CLUSTER SLOTS), as argv, for the permission check of connect() (RedisProbe.cpp).
  [[nodiscard]] virtual std::vector<std::vector<std::string>> nodeCommands() const { return {}; }
  // "redis://127.0.0.1:6379", for messages; never a password.
  [[nodiscard]] virtual std::string describe() const = 0;
  // Connections re-opened after a failure since construction, dropped nodes' included.
  [[nodiscard]] virtual std::uint64_t reconnects() const = 0;
};

}  // namespace dlock::detail
