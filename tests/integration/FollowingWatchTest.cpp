// SPDX-License-Identifier: Apache-2.0
// A release watch that follows its key from node to node (RedisOperator's FollowingWatch), on
// two real servers behind a topology the test moves by hand, as SentinelTopology moves on a
// failover: the node left behind has its subscriber retired.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "LinkProxy.h"
#include "redis/src/RedisOperatorOptions.h"
#include "RedisProcess.h"
#include "redis/src/Subscriber.h"
#include "redis/src/Topology.h"
#include "dlock/redis/RedisOperator.h"

using namespace std::chrono_literals;
using dlock::test::LinkProxy;
using dlock::test::RedisProcess;

namespace {

dlock::ConnectionOptions at(const RedisProcess& server) {
  dlock::ConnectionOptions options;
  options.host = server.host();
  options.port = server.port();
  return options;
}

// Two nodes, one of which is "the master"; moveTo() switches as SentinelTopology::install does.
class TwoNodeTopology final : public dlock::detail::Topology {
 public:
  TwoNodeTopology(const RedisProcess& a, const RedisProcess& b)
      : nodes_{std::make_unique<dlock::detail::RedisNode>(at(a), dlock::PoolOptions{}, false),
               std::make_unique<dlock::detail::RedisNode>(at(b), dlock::PoolOptions{}, false)} {}

  void moveTo(std::size_t index) {
    const std::size_t previous = master_.exchange(index);
    ++version_;
    if (previous != index) nodes_[previous]->retireSubscriber();
  }

  dlock::detail::Route route(std::uint16_t slot) override {
    return dlock::detail::Route{nodes_[master_].get(), slot, false, version_, {}};
  }
  dlock::detail::Verdict afterReply(const dlock::detail::Route&, std::string_view) override { return {}; }
  dlock::detail::Verdict afterFailure(const dlock::detail::Route&, dlock::detail::Failure) override { return {}; }
  [[nodiscard]] bool retryable(std::string_view) const override { return false; }
  std::vector<dlock::detail::RedisNode*> owners(const std::vector<std::uint16_t>& slots) override {
    return std::vector<dlock::detail::RedisNode*>(slots.size(), nodes_[master_].get());
  }
  [[nodiscard]] bool serves(const dlock::detail::RedisNode* node, std::uint16_t) const override {
    return node == nodes_[master_].get();
  }
  [[nodiscard]] bool sharded() const noexcept override { return false; }
  [[nodiscard]] std::string describe() const override { return "two nodes"; }
  [[nodiscard]] std::uint64_t reconnects() const override { return 0; }

 private:
  std::array<std::unique_ptr<dlock::detail::RedisNode>, 2> nodes_;
  std::atomic<std::size_t> master_{0};
  std::atomic<std::uint64_t> version_{1};
};

class MovingOperator final : public dlock::RedisOperator {
 public:
  explicit MovingOperator(std::shared_ptr<TwoNodeTopology> topology)
      : RedisOperator(options(), [topology] { return topology; }) {}

 private:
  static dlock::detail::RedisOperatorOptions options() {
    dlock::detail::RedisOperatorOptions options;
    options.keyPrefix = "dlock:";
    return options;
  }
};

}  // namespace

TEST_SUITE("FollowingWatch") {
  TEST_CASE("a watch whose node moved away and back (A to B to A) listens on A again, not woken at once for ever") {
    RedisProcess a;
    RedisProcess b;
    const auto topology = std::make_shared<TwoNodeTopology>(a, b);
    MovingOperator op(topology);
    REQUIRE(op.lock("k", "holder", 60s).acquired);
    const auto watch = op.watch("k");

    // Both moves before the waiter looks again: the subscriber its watch is on was retired.
    topology->moveTo(1);
    topology->moveTo(0);

    // The first wait may report a possible release (one may have gone unheard while it moved);
    // after that, with nothing released, waits run to their timeout. A watch left on the retired
    // subscriber returns at once every time: the waiter would retry in a tight loop.
    (void)watch->waitForRelease(200ms);
    CHECK_FALSE(watch->waitForRelease(200ms));
    CHECK_FALSE(watch->waitForRelease(200ms));

    // And it hears A's releases: those that wake it, after a try found the key taken (registered).
    REQUIRE_FALSE(op.lock("k", "waiter", 60s).acquired);
    REQUIRE(op.unlock("k", "holder").released);
    CHECK(watch->waitForRelease(30s));
  }

  TEST_CASE("a watch that tells of releases (an async acquire's) tells of them after following its key to another node") {
    RedisProcess a;
    RedisProcess b;
    const auto topology = std::make_shared<TwoNodeTopology>(a, b);
    MovingOperator op(topology);
    const auto watch = op.watch("k");
    std::atomic<int> told{0};
    REQUIRE(watch->notifyOnRelease([&told] { told.fetch_add(1); }));
    const auto toldAfter = [&](int seen) {
      const auto until = std::chrono::steady_clock::now() + 30s;
      while (told.load() <= seen && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      return told.load() > seen;
    };

    // On A: a release that wakes this process (a try found the key taken) tells the watch.
    REQUIRE(op.lock("k", "holder", 60s).acquired);
    REQUIRE_FALSE(op.lock("k", "waiter", 60s).acquired);
    int seen = told.load();
    REQUIRE(op.unlock("k", "holder").released);
    CHECK(toldAfter(seen));
    CHECK(watch->waitForRelease(0ms));

    // Moved to B: A's subscriber retired (which tells), the next poll follows the key to B, and
    // B's releases tell the same callback.
    topology->moveTo(1);
    (void)watch->waitForRelease(0ms);  // the poll the async acquirer makes when told, or at its backstop
    REQUIRE(op.lock("k", "holder", 60s).acquired);
    REQUIRE_FALSE(op.lock("k", "waiter", 60s).acquired);
    seen = told.load();
    REQUIRE(op.unlock("k", "holder").released);
    CHECK(toldAfter(seen));
    CHECK(watch->waitForRelease(0ms));
  }

  TEST_CASE("retiring a node's subscriber does not wait for its reconnect in progress (topologies retire under their locks)") {
    RedisProcess::Options serverOptions;
    serverOptions.config = {"requirepass secret"};
    RedisProcess server(serverOptions);
    LinkProxy proxy(server.host(), server.port());
    dlock::ConnectionOptions options;
    options.host = "127.0.0.1";
    options.port = proxy.port();
    options.password = "secret";
    options.connectTimeout = 30s;
    options.commandTimeout = 30s;  // an AUTH held by the proxy blocks the thread this long
    dlock::detail::RedisNode node(options, dlock::PoolOptions{}, false);
    const auto watch = node.subscriber()->watch("dlock:{k}:released");

    // The subscriber loses its connection and reconnects into a proxy that holds its AUTH.
    proxy.holdNewConnections();
    proxy.resetAll();
    REQUIRE(proxy.waitForHeld("AUTH", 10s));

    const auto start = std::chrono::steady_clock::now();
    node.retireSubscriber();
    // Returned without joining a thread stuck for 30 s; its waiters woke.
    CHECK(std::chrono::steady_clock::now() - start < 10s);
    CHECK(node.subscriberIfAny().get() == nullptr);
    CHECK(watch->waitForRelease(10s));
    proxy.release();  // the thread gives up and ends; the node joins it on destruction
  }
}
