// SPDX-License-Identifier: Apache-2.0
// FixedTopology.h — one Redis server: every key on its one node, which never moves. (A pooled
// connection found dead is still replaced once: RetryPolicy does that for every topology.)
// Owner: a RedisOperator. Thread safety: thread-safe.
#pragma once

#include "Topology.h"

namespace dlock::detail {

class FixedTopology final : public Topology {
 public:
  FixedTopology(const ConnectionOptions& connection, const PoolOptions& pool) : node_(connection, pool, false) {}

  Route route(std::uint16_t slot) override { return Route{&node_, slot, false, 0, {}}; }
  Verdict afterReply(const Route&, std::string_view) override { return {}; }
  Verdict afterFailure(const Route&, Failure) override { return {}; }
  [[nodiscard]] bool retryable(std::string_view /*error*/) const override { return false; }
  std::vector<RedisNode*> owners(const std::vector<std::uint16_t>& slots) override {
    return std::vector<RedisNode*>(slots.size(), &node_);
  }
  [[nodiscard]] bool serves(const RedisNode* node, std::uint16_t /*slot*/) const override { return node == &node_; }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] std::string describe() const override {
    const ConnectionOptions& options = node_.connectionOptions();
    if (!options.unixSocket.empty()) return "unix://" + options.unixSocket;
    return (options.tls.enabled ? "rediss://" : "redis://") + node_.name();
  }
  [[nodiscard]] std::uint64_t reconnects() const override { return node_.reconnects(); }

 private:
  RedisNode node_;
};

}  // namespace dlock::detail
