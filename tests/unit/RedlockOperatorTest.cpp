// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using dlock::test::extendedFlags;

namespace {

// A node with switchable faults, over a MemoryOperator.
class ScriptedNode final : public dlock::IOperator, public dlock::IFenceRaiser, public dlock::ILeaseInspector {
 public:
  explicit ScriptedNode(std::shared_ptr<dlock::Clock> clock)
      : memory_(std::make_shared<dlock::MemoryOperator>(std::move(clock))) {}

  std::atomic<bool> down{false};        // every call throws ConnectionError
  std::atomic<bool> failRaise{false};   // raiseFence throws ConnectionError
  std::atomic<bool> failUnlock{false};  // unlock throws ConnectionError
  std::atomic<bool> failWatch{false};   // watch throws ConnectionError
  // unlock runs twice, as a pool retries after a lost reply: the second try is the answer
  std::atomic<bool> retryUnlock{false};
  std::atomic<int> locks{0};
  std::atomic<int> raises{0};

  dlock::MemoryOperator& memory() { return *memory_; }

  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    check();
    ++locks;
    return memory_->lock(key, token, ttl);
  }
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    check(failUnlock);
    if (!retryUnlock) return memory_->unlock(key, token);
    (void)memory_->unlock(key, token);
    return memory_->unlock(key, token);  // answered from the record the first try left
  }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    check();
    return memory_->extend(key, token, ttl);
  }
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override {
    check(failRaise);
    ++raises;
    return memory_->raiseFence(key, atLeast);
  }
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override {
    check(failWatch);
    return memory_->watch(key);
  }
  dlock::LeaseInfo inspect(std::string_view key) override {
    check();
    return memory_->inspect(key);
  }
  [[nodiscard]] std::string describe() const override { return "scripted://"; }

 private:
  void check() const {
    if (down) throw dlock::ConnectionError("dlock: scripted://: injected failure");
  }
  void check(const std::atomic<bool>& fault) const {
    check();
    if (fault) throw dlock::ConnectionError("dlock: scripted://: injected failure");
  }

  std::shared_ptr<dlock::MemoryOperator> memory_;
};

dlock::RedlockOptions patient() {
  dlock::RedlockOptions options;
  options.nodeTimeout = 2s;  // the machine may be loaded; timing tests set their own
  return options;
}

// N memory nodes on one virtual clock (leases end only when the test says so).
struct MemoryNodes {
  explicit MemoryNodes(std::size_t count = 5, dlock::RedlockOptions options = patient()) {
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (std::size_t i = 0; i < count; ++i) {
      nodes.push_back(std::make_shared<dlock::MemoryOperator>(clock));
      members.push_back(nodes.back());
    }
    redlock = std::make_shared<dlock::RedlockOperator>(members, options);
  }

  // How many nodes hold `key` for `token` now.
  [[nodiscard]] std::size_t holding(std::string_view key, std::string_view token) const {
    std::size_t count = 0;
    for (const auto& node : nodes) count += node->holderOf(key) == token ? 1 : 0;
    return count;
  }
  [[nodiscard]] std::size_t leases() const {
    std::size_t count = 0;
    for (const auto& node : nodes) count += node->size();
    return count;
  }
  // Every node has received at least `calls` calls and holds no lease.
  [[nodiscard]] bool emptyAfter(std::uint64_t calls) const {
    for (const auto& node : nodes) {
      if (node->calls() < calls) return false;
    }
    return leases() == 0;
  }

  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::vector<std::shared_ptr<dlock::MemoryOperator>> nodes;
  std::shared_ptr<dlock::RedlockOperator> redlock;
};

struct ScriptedNodes {
  explicit ScriptedNodes(std::size_t count = 5, dlock::RedlockOptions options = patient()) {
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (std::size_t i = 0; i < count; ++i) {
      nodes.push_back(std::make_shared<ScriptedNode>(clock));
      members.push_back(nodes.back());
    }
    redlock = std::make_shared<dlock::RedlockOperator>(members, options);
  }
  [[nodiscard]] std::size_t holding(std::string_view key, std::string_view token) const {
    std::size_t count = 0;
    for (const auto& node : nodes) count += node->memory().holderOf(key) == token ? 1 : 0;
    return count;
  }

  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::vector<std::shared_ptr<ScriptedNode>> nodes;
  std::shared_ptr<dlock::RedlockOperator> redlock;
};

// Waits (real time, bounded) until `condition` holds; for work that finishes on worker threads in
// milliseconds, and in seconds on a busy machine.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds budget = 30s) {
  const auto deadline = Steady::now() + budget;
  while (!condition()) {
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A backend with only the lock's seam: no fencing counter to raise, nothing to inspect.
class SeamOnly final : public dlock::IOperator {
 public:
  dlock::AcquireResult lock(std::string_view, std::string_view, std::chrono::milliseconds) override { return {}; }
  dlock::ReleaseResult unlock(std::string_view, std::string_view) override { return {}; }
  bool extend(std::string_view, std::string_view, std::chrono::milliseconds) override { return false; }
  [[nodiscard]] std::string describe() const override { return "seam-only://"; }
};

}  // namespace

TEST_SUITE("RedlockOperator") {
  TEST_CASE("a member that cannot raise a fencing counter is a ConfigError naming it") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    const auto node = [&] { return std::make_shared<dlock::MemoryOperator>(clock); };
    CHECK_THROWS_WITH_AS(dlock::RedlockOperator({node(), std::make_shared<SeamOnly>(), node()}),
                         doctest::Contains("node 1 (seam-only://) cannot raise a fencing counter"), dlock::ConfigError);
  }

  TEST_CASE("raiseFence and inspect on a backend without those capabilities are a ConfigError") {
    SeamOnly seamOnly;
    dlock::IOperator& backend = seamOnly;
    CHECK_THROWS_AS((void)backend.raiseFence("k", 1), dlock::ConfigError);
    CHECK_THROWS_AS((void)backend.inspect("k"), dlock::ConfigError);
  }

  TEST_CASE("needs at least three distinct nodes and sane options") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    const auto node = [&] { return std::make_shared<dlock::MemoryOperator>(clock); };
    CHECK_THROWS_AS(dlock::RedlockOperator({node(), node()}), dlock::ConfigError);
    CHECK_THROWS_AS(dlock::RedlockOperator({node(), nullptr, node()}), dlock::ConfigError);
    const auto same = node();
    CHECK_THROWS_AS(dlock::RedlockOperator({same, node(), same}), dlock::ConfigError);
    dlock::RedlockOptions zeroTimeout;
    zeroTimeout.nodeTimeout = 0ms;
    CHECK_THROWS_AS(dlock::RedlockOperator({node(), node(), node()}, zeroTimeout), dlock::ConfigError);
    dlock::RedlockOptions noThreads;
    noThreads.threadsPerNode = 0;
    CHECK_THROWS_AS(dlock::RedlockOperator({node(), node(), node()}, noThreads), dlock::ConfigError);
    dlock::RedlockOptions badDrift;
    badDrift.clockDriftFactor = 1.5;
    CHECK_THROWS_AS(dlock::RedlockOperator({node(), node(), node()}, badDrift), dlock::ConfigError);

    CHECK(dlock::RedlockOperator({node(), node(), node()}).quorum() == 2);
    CHECK(dlock::RedlockOperator({node(), node(), node(), node()}).quorum() == 3);
    const dlock::RedlockOperator five({node(), node(), node(), node(), node()});
    CHECK(five.quorum() == 3);
    CHECK(five.nodes() == 5);
    CHECK(five.describe() == "redlock://memory://;memory://;memory://;memory://;memory://");
  }

  TEST_CASE("a free key is taken on every node and released on every node") {
    MemoryNodes n;
    const auto acquired = n.redlock->lock("k", "t", 10s);
    REQUIRE(acquired.acquired);
    CHECK(acquired.fencingToken == 1);
    CHECK(n.holding("k", "t") == 5);
    const auto released = n.redlock->unlock("k", "t");
    CHECK(released.released);
    CHECK(n.leases() == 0);
    CHECK(n.redlock->unlock("k", "t").releasedEarlier);  // a retry: every node has the record
    CHECK_FALSE(n.redlock->unlock("k", "other").released);  // nobody holds it now
  }

  TEST_CASE("a key held by another owner on a quorum is refused, leaving nothing of ours behind") {
    MemoryNodes n;
    // The holder has nodes 0-2, with leases ending in 1, 2 and 3 s.
    for (std::size_t i = 0; i < 3; ++i) REQUIRE(n.nodes[i]->lock("k", "holder", std::chrono::seconds(i + 1)).acquired);
    const auto result = n.redlock->lock("k", "t", 10s);
    CHECK_FALSE(result.acquired);
    CHECK(n.holding("k", "t") == 0);  // nodes 3 and 4 were released again
    // Free on a quorum once node 0's lease ends: nodes 0, 3 and 4.
    CHECK(result.holderTtl == 1s);
    n.clock->advance(1s);
    CHECK(n.redlock->lock("k", "t", 10s).acquired);
  }

  TEST_CASE("a split vote acquires nowhere and undoes the partial hold") {
    MemoryNodes n;
    REQUIRE(n.nodes[0]->lock("k", "a", 5s).acquired);
    REQUIRE(n.nodes[1]->lock("k", "a", 5s).acquired);
    REQUIRE(n.nodes[2]->lock("k", "b", 5s).acquired);
    REQUIRE(n.nodes[3]->lock("k", "b", 5s).acquired);
    const auto result = n.redlock->lock("k", "t", 10s);
    CHECK_FALSE(result.acquired);
    CHECK(n.holding("k", "t") == 0);
    CHECK(result.holderTtl == 5s);
  }

  TEST_CASE("two of five nodes down: locking still works") {
    MemoryNodes n;
    n.nodes[0]->failNextCalls(1000);
    n.nodes[3]->failNextCalls(1000);
    const auto result = n.redlock->lock("k", "t", 10s);
    REQUIRE(result.acquired);
    CHECK(n.holding("k", "t") == 3);
    CHECK(n.redlock->extend("k", "t", 10s));
    CHECK(n.redlock->unlock("k", "t").released);
    CHECK(n.holding("k", "t") == 0);
  }

  TEST_CASE("three of five nodes down: lock throws ConnectionError and leaves nothing on the live nodes") {
    MemoryNodes n;
    for (std::size_t i : {0, 2, 4}) n.nodes[i]->failNextCalls(1000);
    try {
      (void)n.redlock->lock("k", "t", 10s);
      FAIL("lock did not throw");
    } catch (const dlock::ConnectionError& error) {
      const std::string message = error.what();
      CHECK(message.find("'k'") != std::string::npos);
      CHECK(message.find("injected connection failure") != std::string::npos);
    }
    CHECK(n.holding("k", "t") == 0);
  }

  TEST_CASE("a tryLock through the lock core with three nodes down retries within its timeout, then ConnectionError") {
    MemoryNodes n;
    for (std::size_t i : {1, 2, 3}) n.nodes[i]->failNextCalls(1000000);
    auto lock = dlock::LockBuilder().backend(n.redlock).leaseTime(10s).build();
    CHECK_THROWS_WITH_AS((void)lock->tryLock("k", 300ms), doctest::Contains("stayed unreachable"),
                         dlock::ConnectionError);
    CHECK(lock->stats().outageRetries > 0);  // the nodes may come back within the wait
    CHECK(n.leases() == 0);
    CHECK_FALSE(lock->isHeld("k"));
    for (std::size_t i : {1, 2, 3}) n.nodes[i]->failNextCalls(0);
  }

  TEST_CASE("fencing tokens keep increasing when successive quorums differ") {
    ScriptedNodes n;
    // Node 4 has handed out many tokens before (its counter is ahead of the others).
    REQUIRE(n.nodes[4]->memory().raiseFence("k", 100) == 100);
    const auto first = n.redlock->lock("k", "t1", 10s);
    REQUIRE(first.acquired);
    CHECK(first.fencingToken == 101);
    // The highest token was carried to the nodes that were behind.
    for (std::size_t i = 0; i < 4; ++i) CHECK(n.nodes[i]->memory().inspect("k").fencingToken == 101);
    REQUIRE(n.redlock->unlock("k", "t1").released);

    // Without node 4, the quorum 0-2 still knows 101.
    n.nodes[4]->down = true;
    n.nodes[3]->down = true;
    const auto second = n.redlock->lock("k", "t2", 10s);
    REQUIRE(second.acquired);
    CHECK(second.fencingToken > first.fencingToken);
    REQUIRE(n.redlock->unlock("k", "t2").released);

    // Nodes 3 and 4 are back (3 only knows 101); 0 and 1 are gone: the quorum 2-4 overlaps.
    n.nodes[3]->down = false;
    n.nodes[4]->down = false;
    n.nodes[0]->down = true;
    n.nodes[1]->down = true;
    const auto third = n.redlock->lock("k", "t3", 10s);
    REQUIRE(third.acquired);
    CHECK(third.fencingToken > second.fencingToken);
    CHECK(n.nodes[3]->memory().inspect("k").fencingToken == third.fencingToken);
  }

  TEST_CASE("an acquisition whose fencing token cannot reach a quorum is undone") {
    ScriptedNodes n;
    REQUIRE(n.nodes[0]->memory().raiseFence("k", 50) == 50);
    // Three of the four nodes behind node 0 cannot be raised: only 0 and 4 would carry 51.
    for (std::size_t i : {1, 2, 3}) n.nodes[i]->failRaise = true;
    // Three nodes that cannot answer the raise: as if they could not answer at all.
    CHECK_THROWS_AS((void)n.redlock->lock("k", "t", 10s), dlock::ConnectionError);
    CHECK(n.holding("k", "t") == 0);
    for (std::size_t i : {1, 2, 3}) n.nodes[i]->failRaise = false;
    const auto again = n.redlock->lock("k", "t", 10s);
    REQUIRE(again.acquired);
    CHECK(again.fencingToken == 52);  // node 0 handed out 51 to the undone attempt
  }

  TEST_CASE("a node that may still hold the token from an undone attempt does not count for a retry") {
    ScriptedNodes n;
    // Attempt 1: another owner has nodes 2-4, we get 0 and 1, and the release on node 0 fails.
    for (std::size_t i : {2, 3, 4}) REQUIRE(n.nodes[i]->memory().lock("k", "other", 5s).acquired);
    n.nodes[0]->failUnlock = true;
    CHECK_FALSE(n.redlock->lock("k", "t", 10s).acquired);
    n.nodes[0]->failUnlock = false;
    CHECK(n.nodes[0]->memory().holderOf("k") == "t");  // our key survived there
    CHECK(n.nodes[1]->memory().holderOf("k").empty());
    // Attempt 2 with the same token: node 0 says "acquired" again, but its lease started with
    // attempt 1. With 3 and 4 still taken, nodes 0-2 would be a quorum only by counting node 0.
    REQUIRE(n.nodes[2]->memory().unlock("k", "other").released);
    CHECK_FALSE(n.redlock->lock("k", "t", 10s).acquired);
    // Once the other owner is gone, a quorum without node 0 acquires.
    REQUIRE(n.nodes[3]->memory().unlock("k", "other").released);
    CHECK(n.redlock->lock("k", "t", 10s).acquired);
  }

  TEST_CASE("an attempt whose elapsed time eats the validity fails and is rolled back") {
    dlock::RedlockOptions options;
    options.nodeTimeout = 10s;
    MemoryNodes n(5, options);
    for (auto& node : n.nodes) node->setLatency(400ms);
    // A 300 ms lease leaves under 295 ms of validity, of which the attempt waits half; every node
    // takes 400 ms to answer. Asking all five takes far less than that half, even on a busy
    // machine, so each node gets the acquire and then the release behind it.
    const auto start = Steady::now();
    const auto result = n.redlock->lock("k", "t", 300ms);
    CHECK(Steady::now() - start < options.nodeTimeout / 2);  // gave up at the validity, not at the node timeout
    CHECK_FALSE(result.acquired);
    // The acquires land late; the releases queued behind them take the keys away again. The
    // members run on a virtual clock, so nothing expires on its own meanwhile.
    CHECK(eventually([&] { return n.emptyAfter(2); }));
    for (auto& node : n.nodes) node->setLatency(0ms);
    CHECK(n.redlock->lock("k", "t2", 5s).acquired);
  }

  TEST_CASE("an attempt whose fencing round trip eats the validity fails and is rolled back") {
    dlock::RedlockOptions options;
    options.nodeTimeout = 2s;
    MemoryNodes n(5, options);
    // Different counters everywhere, so whichever quorum answers first must be raised to its
    // highest: a second round trip.
    for (std::uint64_t i = 0; i < n.nodes.size(); ++i) REQUIRE(n.nodes[i]->raiseFence("k", 7 + i) == 7 + i);
    for (auto& node : n.nodes) node->setLatency(25ms);
    // Acquire (25 ms) + raise (25 ms) > 40 ms - drift.
    const auto result = n.redlock->lock("k", "t", 40ms);
    CHECK_FALSE(result.acquired);
    CHECK(n.leases() == 0);  // the rollback waited for the nodes that had taken the key
    for (auto& node : n.nodes) node->setLatency(0ms);
    const auto fast = n.redlock->lock("k", "t2", 5s);
    CHECK(fast.acquired);
    CHECK(fast.fencingToken >= 8);
  }

  TEST_CASE("a node slower than the node timeout holds up an acquisition only that long") {
    dlock::RedlockOptions options;
    options.nodeTimeout = 100ms;
    MemoryNodes n(5, options);
    constexpr auto kLatency = 2s;
    n.nodes[2]->setLatency(kLatency);
    const auto start = Steady::now();
    const auto result = n.redlock->lock("k", "t", 10s);
    const auto took = Steady::now() - start;
    CHECK(took >= 100ms);  // the other nodes answered at once; node 2 had its full chance
    CHECK(took < kLatency / 2);
    CHECK(result.acquired);
    CHECK(n.holding("k", "t") == 4);
    n.nodes[2]->setLatency(0ms);
  }

  TEST_CASE("a node slower than a short lease's validity does not cost the acquisition or its renewal") {
    dlock::RedlockOptions options;
    options.nodeTimeout = 2s;  // longer than the validity: the validity bounds the wait
    MemoryNodes n(5, options);
    constexpr auto kLatency = 3s;  // far beyond the waits below, so a bound can tell them apart
    n.nodes[2]->setLatency(kLatency);
    // 400 ms - 6 ms drift: the quorum answers at once; node 2 gets half the validity, no more.
    auto start = Steady::now();
    const auto result = n.redlock->lock("k", "t", 400ms);
    CHECK(Steady::now() - start < kLatency / 2);
    CHECK(result.acquired);
    CHECK(n.holding("k", "t") >= 4);
    start = Steady::now();
    CHECK(n.redlock->extend("k", "t", 400ms));
    CHECK(extendedFlags(n.redlock->extendAll({{"k", "t"}, {"other", "t"}}, 400ms)) == std::vector<bool>{true, false});
    CHECK(Steady::now() - start < kLatency / 2);
    n.nodes[2]->setLatency(0ms);
  }

  TEST_CASE("three slow nodes fail an acquisition after the node timeout, not after their latency") {
    dlock::RedlockOptions options;
    options.nodeTimeout = 50ms;
    MemoryNodes n(5, options);
    constexpr auto kLatency = 2s;
    for (std::size_t i : {0, 1, 2}) n.nodes[i]->setLatency(kLatency);
    const auto start = Steady::now();
    CHECK_THROWS_AS((void)n.redlock->lock("k", "t", 10s), dlock::ConnectionError);
    CHECK(Steady::now() - start < kLatency / 2);
    for (std::size_t i : {0, 1, 2}) n.nodes[i]->setLatency(0ms);
    // The late acquires are undone by the releases queued behind them.
    CHECK(eventually([&] { return n.emptyAfter(2); }));
  }

  TEST_CASE("unlock needs a quorum, and says so when the missing nodes could tip it") {
    MemoryNodes n;
    // Nodes that lost the lease (restarted empty) count against the quorum.
    REQUIRE(n.redlock->lock("a", "t", 10s).acquired);
    for (std::size_t i : {0, 1}) n.nodes[i]->forgetLeases();
    CHECK(n.redlock->unlock("a", "t").released);  // still held on 2, 3 and 4

    REQUIRE(n.redlock->lock("b", "t", 10s).acquired);
    for (std::size_t i : {0, 1, 2}) n.nodes[i]->forgetLeases();
    CHECK_FALSE(n.redlock->unlock("b", "t").released);  // only 2 of 5 still had it: lost

    REQUIRE(n.redlock->lock("c", "t", 10s).acquired);
    for (std::size_t i : {0, 1}) n.nodes[i]->forgetLeases();
    n.nodes[2]->failNextCalls(1);
    CHECK_THROWS_AS((void)n.redlock->unlock("c", "t"), dlock::ConnectionError);  // 2 released, 1 unknown
    CHECK(n.holding("c", "t") == 1);                                              // node 2
    // A retry counts the nodes that released the first time.
    CHECK(n.redlock->unlock("c", "t").released);
    CHECK(n.holding("c", "t") == 0);
  }

  TEST_CASE("extend needs a quorum, and extendAll makes one call per node per batch") {
    MemoryNodes n;
    REQUIRE(n.redlock->lock("a", "ta", 10s).acquired);
    REQUIRE(n.redlock->lock("b", "tb", 10s).acquired);
    for (std::size_t i : {0, 1, 2}) REQUIRE(n.nodes[i]->unlock("b", "tb").released);
    std::vector<std::uint64_t> before;
    for (auto& node : n.nodes) before.push_back(node->calls());
    const auto extended = n.redlock->extendAll({{"a", "ta"}, {"b", "tb"}, {"c", "tc"}}, 20s);
    CHECK(extendedFlags(extended) == std::vector<bool>{true, false, false});
    for (std::size_t i = 0; i < n.nodes.size(); ++i) CHECK(n.nodes[i]->calls() == before[i] + 1);
    n.clock->advance(15s);
    CHECK(n.redlock->inspect("a").held);  // extended to 20 s on every node

    CHECK(n.redlock->extend("a", "ta", 20s));
    CHECK_FALSE(n.redlock->extend("a", "wrong", 20s));
    n.nodes[0]->failNextCalls(1);
    n.nodes[1]->failNextCalls(1);
    CHECK(n.redlock->extend("a", "ta", 20s));  // 3 of 5 is enough
    REQUIRE(n.nodes[2]->unlock("a", "ta").released);
    n.nodes[0]->failNextCalls(1);
    n.nodes[1]->failNextCalls(1);
    CHECK_THROWS_AS((void)n.redlock->extend("a", "ta", 20s), dlock::ConnectionError);  // 2 yes, 2 unknown
  }

  TEST_CASE("an unlock counts a node whose retried release found its own record, and never one that lost the key") {
    ScriptedNodes n;
    REQUIRE(n.redlock->lock("a", "t", 10s).acquired);
    for (std::size_t i : {0, 1}) n.nodes[i]->retryUnlock = true;
    const auto enough = n.redlock->unlock("a", "t");  // 3 released now, 2 by their record
    CHECK(enough.released);
    CHECK(n.holding("a", "t") == 0);

    REQUIRE(n.redlock->lock("b", "t", 10s).acquired);
    for (std::size_t i : {0, 1, 2}) n.nodes[i]->retryUnlock = true;  // a quorum only by records
    const auto earlier = n.redlock->unlock("b", "t");
    CHECK(earlier.released);
    CHECK(earlier.releasedEarlier);

    REQUIRE(n.redlock->lock("c", "t", 10s).acquired);
    for (std::size_t i : {0, 1, 2, 3}) n.nodes[i]->memory().forgetLeases();  // restarted empty
    const auto lost = n.redlock->unlock("c", "t");  // 1 released; 4 with neither key nor record
    CHECK_FALSE(lost.released);

    auto lock = dlock::LockBuilder().backend(n.redlock).leaseTime(10s).build();
    REQUIRE(lock->tryLock("d"));
    CHECK_NOTHROW(lock->unlock("d"));  // every node released it by its record: released
    CHECK(lock->stats().lostLeases == 0);
    REQUIRE(lock->tryLock("e"));
    for (std::size_t i : {0, 1, 2}) n.nodes[i]->memory().forgetLeases();
    CHECK_THROWS_AS(lock->unlock("e"), dlock::LockLostError);  // valid locally, lost on a quorum
  }

  TEST_CASE("inspect gives the quorum view") {
    MemoryNodes n;
    CHECK_FALSE(n.redlock->inspect("k").held);
    REQUIRE(n.nodes[0]->raiseFence("k", 40) == 40);
    // Leases ending in 1..5 s: a quorum holds it until the third-longest ends (3 s).
    for (std::size_t i = 0; i < 5; ++i) REQUIRE(n.nodes[i]->lock("k", "t", std::chrono::seconds(i + 1)).acquired);
    auto info = n.redlock->inspect("k");
    CHECK(info.held);
    CHECK(info.remaining == 3s);
    CHECK(info.fencingToken == 41);
    n.clock->advance(3s);
    CHECK_FALSE(n.redlock->inspect("k").held);  // only two nodes left
    // Two holders and two unknown nodes: undecidable.
    for (std::size_t i : {0, 1}) n.nodes[i]->failNextCalls(1);
    CHECK_THROWS_AS((void)n.redlock->inspect("k"), dlock::ConnectionError);
  }

  TEST_CASE("raiseFence raises a quorum and reports the highest counter") {
    MemoryNodes n;
    REQUIRE(n.nodes[3]->raiseFence("k", 30) == 30);
    CHECK(n.redlock->raiseFence("k", 20) == 30);
    for (auto& node : n.nodes) CHECK(node->inspect("k").fencingToken >= 20);
    for (std::size_t i : {0, 1, 2}) n.nodes[i]->failNextCalls(1);
    CHECK_THROWS_AS((void)n.redlock->raiseFence("k", 40), dlock::ConnectionError);
  }

  TEST_CASE("the combined watch wakes on a release seen by any node, and tolerates a dead one") {
    ScriptedNodes n;
    n.nodes[1]->failWatch = true;
    REQUIRE(n.redlock->lock("k", "t", 60s).acquired);
    auto watch = n.redlock->watch("k");
    REQUIRE(watch != nullptr);
    CHECK_FALSE(watch->waitForRelease(20ms));
    // A release deletes the key on a quorum; the watch covers a quorum of the live nodes, and two
    // quorums always share a node. Here the release reaches nodes 0, 3 and 4 only.
    std::thread releaser([&] {
      for (std::size_t i : {0, 3, 4}) CHECK(n.nodes[i]->memory().unlock("k", "t").released);
    });
    const auto start = Steady::now();
    CHECK(watch->waitForRelease(10s));
    CHECK(Steady::now() - start < 5s);
    releaser.join();
    while (watch->waitForRelease(0ms)) {
    }
    CHECK_FALSE(watch->waitForRelease(30ms));  // no release, no wake-up
    // No node can subscribe: no watch (waiters poll).
    for (auto& node : n.nodes) node->failWatch = true;
    CHECK(n.redlock->watch("k") == nullptr);
  }

  TEST_CASE("release counts the waiters once, not once per node") {
    MemoryNodes n;
    REQUIRE(n.redlock->lock("k", "t", 60s).acquired);
    auto watch = n.redlock->watch("k");
    const auto released = n.redlock->unlock("k", "t");
    CHECK(released.released);
    CHECK(released.notified == 1);
    CHECK(watch->waitForRelease(0ms));
  }

  TEST_CASE("threads contending through locks on one redlock get the key in turn with growing tokens") {
    MemoryNodes n;
    auto lock = dlock::LockBuilder().backend(n.redlock).leaseTime(60s).build();
    long counter = 0;
    std::mutex seenMutex;
    std::vector<std::uint64_t> fences;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 25; ++i) {
          lock->lock("k");
          const long seen = counter;
          std::this_thread::yield();
          counter = seen + 1;
          {
            std::lock_guard<std::mutex> guard(seenMutex);
            fences.push_back(lock->fencingToken("k"));
          }
          lock->unlock("k");
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(counter == 100);
    REQUIRE(fences.size() == 100);
    for (std::size_t i = 1; i < fences.size(); ++i) CHECK(fences[i] > fences[i - 1]);
    CHECK(n.leases() == 0);
  }

  TEST_CASE("the watchdog renews through the redlock, one batch per node per interval") {
    MemoryNodes n;
    auto lock = dlock::LockBuilder().backend(n.redlock).clock(n.clock).watchdogLease(30s).build();
    REQUIRE(lock->tryLock("a"));
    REQUIRE(lock->tryLock("b"));
    const auto before = n.nodes[0]->calls();
    for (int step = 0; step < 9; ++step) {  // 90 s: three leases
      n.clock->advance(10s);
      CHECK(lock->isHeld("a"));
    }
    CHECK(n.nodes[0]->calls() - before == 9);
    CHECK(n.redlock->inspect("a").held);
    CHECK(lock->stats().renewals == 18);
    lock->unlock("a");
    lock->unlock("b");
    CHECK(n.leases() == 0);
  }

  TEST_CASE("after a renewal the lease is held for ttl - drift, as after the acquisition") {
    MemoryNodes n;
    auto lock = dlock::LockBuilder().backend(n.redlock).clock(n.clock).watchdogLease(30s).build();
    // Drift: 30 s * 0.01 + 2 ms = 302 ms, so each grant holds for 29,698 ms from when it was sent.
    REQUIRE(lock->tryLock("k"));
    n.clock->advance(10s);  // renewed at 10 s: held until 39.698 s
    REQUIRE(lock->stats().renewals == 1);
    for (const auto& node : n.nodes) node->failNextCalls(1000);  // no renewal gets through any more
    n.clock->advance(10s);
    n.clock->advance(10s);
    CHECK(lock->stats().renewalFailures == 2);
    n.clock->advance(9698ms - 1ms);
    CHECK(lock->isHeld("k"));
    n.clock->advance(1ms);
    CHECK_FALSE(lock->isHeld("k"));  // not at 40 s, the renewal's time + the whole ttl
    for (const auto& node : n.nodes) node->failNextCalls(0);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("the watchdog reports a lease lost when a quorum no longer has it") {
    MemoryNodes n;
    auto lock = dlock::LockBuilder().backend(n.redlock).clock(n.clock).watchdogLease(30s).build();
    REQUIRE(lock->tryLock("k"));
    const std::string token = n.nodes[0]->holderOf("k");
    for (std::size_t i : {0, 1, 2}) REQUIRE(n.nodes[i]->unlock("k", token).released);
    n.clock->advance(10s);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }

  TEST_CASE("a waiter is woken by the release through the combined watch") {
    MemoryNodes n;
    auto holder = dlock::LockBuilder().backend(n.redlock).leaseTime(60s).build();
    auto waiter = dlock::LockBuilder().backend(n.redlock).leaseTime(60s).waitStrategy(
                      std::make_shared<dlock::NotifyWait>(10s)).build();
    REQUIRE(holder->tryLock("k"));
    std::atomic<bool> acquired{false};
    Steady::time_point acquiredAt;
    std::thread thread([&] {
      acquired = waiter->tryLock("k", 20s);
      acquiredAt = Steady::now();
      if (acquired) waiter->unlock("k");
    });
    // The waiter attempted, queued, subscribed and attempted again: it sleeps on the watch.
    CHECK(eventually([&] { return waiter->stats().attempts >= 3; }));
    const auto releasedAt = Steady::now();
    holder->unlock("k");
    thread.join();
    REQUIRE(acquired);
    CHECK(acquiredAt - releasedAt < 5s);  // the recheck is 10 s and the lease 60 s: only a release wakes it
  }

  TEST_CASE("connect builds a redlock from member URIs and refuses bad sets") {
    const auto memory = dlock::connect("redlock://memory://;memory://;memory://");
    CHECK(memory->describe() == "redlock://memory://;memory://;memory://");
    CHECK(memory->lock("k", "t", 1s).acquired);
    CHECK_THROWS_AS((void)dlock::connect("redlock://memory://;memory://"), dlock::ConfigError);
    // Redis nodes told to connect lazily: nothing is contacted here.
    const auto hosts =
        dlock::connect("redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003?node_timeout=30ms&lazy_connect=true");
    CHECK(hosts->describe() ==
          "redlock://redis://127.0.0.1:7001;redis://127.0.0.1:7002;redis://127.0.0.1:7003");
    CHECK(dynamic_cast<dlock::RedlockOperator&>(*hosts).options().nodeTimeout == 30ms);
    const auto members = dlock::connect(
        "redlock://redis://127.0.0.1:7001?node_timeout=20ms;redis://127.0.0.1:7002;redis://:secret@127.0.0.1:7003",
        dlock::ConnectOptions{true});
    CHECK(dynamic_cast<dlock::RedlockOperator&>(*members).options().nodeTimeout == dlock::RedlockOptions().nodeTimeout);
    CHECK(members->describe().find("secret") == std::string::npos);
    try {
      (void)dlock::connect("redlock://:pw@127.0.0.1:7001,127.0.0.1:7001,127.0.0.1:7002");
      FAIL("a node twice was accepted");
    } catch (const dlock::ConfigError& error) {
      const std::string message = error.what();
      CHECK(message.find("twice") != std::string::npos);
      CHECK(message.find("pw") == std::string::npos);
    }
    CHECK_THROWS_AS((void)dlock::connect("redlock://127.0.0.1:7001,127.0.0.1:7002"), dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::connect("redlock://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003?node_timeout=0ms"),
                    dlock::ConfigError);
  }

  TEST_CASE("a lease no longer than the drift allowance is refused before anything is sent") {
    MemoryNodes n;
    CHECK_THROWS_AS((void)n.redlock->lock("k", "t", 2ms), dlock::InvalidArgumentError);
    CHECK(n.nodes[0]->calls() == 0);
  }
}
