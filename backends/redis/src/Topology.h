// SPDX-License-Identifier: Apache-2.0
// Topology.h — where a call of the lock protocol goes, and what a failure there means: the part
// that differs between one server, a Sentinel-watched master and a Cluster. RedisOperator asks it
// for a node before each try and, after a try that failed, whether to try again.
//
//   FixedTopology      one server; a dead pooled connection is retried once, nothing else
//   SentinelTopology   the master the sentinels name; follows failovers
//   ClusterTopology    the master of the key's slot; follows MOVED, ASK, TRYAGAIN, failovers
//
// Owner: one RedisOperator, per process. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "RedisNode.h"

namespace dlock::detail {

// Where one try goes.
struct Route {
  RedisNode* node = nullptr;
  std::uint16_t slot = 0;     // the key's (0 where slots do not matter)
  bool asking = false;        // an ASK redirection: ASKING first, on the same connection
  std::uint64_t version = 0;  // the topology's view it came from, to tell whether it changed since
};

// How a try ended without a reply.
enum class Failure {
  NoConnection,  // no connection could be had: the command was not sent
  Stale,         // a pooled connection had died while idle (not a timeout): not run on a live server
  Io,            // the connection failed or timed out after the command may have been sent
};

// One call across its tries, as the topology needs to know it.
struct Call {
  Call(const char* what, std::string_view about, std::chrono::milliseconds budget)
      : operation(what), key(about), deadline(std::chrono::steady_clock::now() + budget) {}

  const char* operation;
  std::string_view key;
  std::chrono::steady_clock::time_point deadline;  // transient failures are retried until then
  std::chrono::milliseconds backoff{5};
  unsigned redirects = 0;
  unsigned retries = 0;           // tries the topology granted after a failure
  RedisNode* redirected = nullptr;  // an ASK target for the next try
  bool subscribing = false;       // a subscription: it cannot follow ASK
  bool staleRetried = false;      // a dead pooled connection was replaced once already
  std::string note;               // appended to the final error, e.g. why the topology could not recover
};

class Topology {
 public:
  Topology() = default;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  virtual ~Topology() = default;

  // The node for the next try of `call` on `slot`; ConnectionError when there is none.
  virtual Route route(std::uint16_t slot, Call& call) = 0;
  // After an error reply: true to try again, false to hand the reply to the caller.
  virtual bool retryAfterReply(const Route& route, std::string_view error, Call& call) = 0;
  // After a try without a reply: true to try again, false to give up (`call.note` may say why).
  virtual bool retryAfterFailure(const Route& route, Failure failure, Call& call) = 0;

  // True for an error reply that retryAfterReply() could act on (a redirection, a "not now"): a
  // batch that meets one sends its calls again one by one.
  [[nodiscard]] virtual bool retryable(std::string_view error) const = 0;

  // The nodes serving `slots` now, null where none is known; one look at the topology.
  virtual std::vector<RedisNode*> owners(const std::vector<std::uint16_t>& slots) = 0;
  // True while `node` serves `slot`: a release watch there still hears its releases.
  [[nodiscard]] virtual bool serves(const RedisNode* node, std::uint16_t slot) const = 0;

  // A cluster: names and release messages are per slot (see KeyNames.h), one script per slot.
  [[nodiscard]] virtual bool sharded() const noexcept = 0;
  // "redis://127.0.0.1:6379", for messages; never a password.
  [[nodiscard]] virtual std::string describe() const = 0;
  // Connections re-opened after a failure since construction, dropped nodes' included.
  [[nodiscard]] virtual std::uint64_t reconnects() const = 0;
};

}  // namespace dlock::detail
