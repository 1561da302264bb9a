// SPDX-License-Identifier: Apache-2.0
// How the Redis operators retry, through their public classes, against fake nodes (FakeRedis):
// no redis-server. Each fake answers the lock scripts by command name (EVALSHA, EVAL) with what the
// test queued, so a test decides every reply and counts every command that reached a node.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "FakeRedis.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/cluster/ClusterOperator.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/sentinel/SentinelOperator.h"
#include "dlock/single/SingleOperator.h"

namespace {

using namespace std::chrono_literals;
using dlock::test::Answer;
using dlock::test::Command;
using dlock::test::FakeRedis;
using dlock::test::Handler;
namespace resp = dlock::test::resp;

constexpr auto kTtl = 10s;
constexpr const char* kToken = "token-1";

// The acquire script's reply when it took the key.
std::string acquired(long long fence) { return resp::array({resp::integer(1), resp::bulk(std::to_string(fence))}); }

std::string moved(std::uint16_t slot, const FakeRedis& to) {
  return resp::error("MOVED " + std::to_string(slot) + " " + to.address());
}

std::uint16_t slotOf(const std::string& key) { return dlock::clusterKeyNames(dlock::kDefaultKeyPrefix, key).slot; }

// What a fake node answers its script calls (EVALSHA, EVAL): the queued answers first, in order,
// then the standing one. Shared with the node's thread.
class ScriptAnswers {
 public:
  explicit ScriptAnswers(Answer standing) : standing_(std::move(standing)) {}

  void queue(const Answer& answer, int times = 1) {
    std::lock_guard<std::mutex> guard(mutex_);
    for (int i = 0; i < times; ++i) queued_.push_back(answer);
  }

  Answer next() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (queued_.empty()) return standing_;
    Answer answer = queued_.front();
    queued_.pop_front();
    return answer;
  }

 private:
  std::mutex mutex_;
  std::deque<Answer> queued_;  // guarded by mutex_
  const Answer standing_;
};

// A cluster's slot map, as every fake node of a test tells it (CLUSTER SLOTS). Shared with the
// nodes' threads.
class SlotMap {
 public:
  struct Range {
    std::uint16_t first;
    std::uint16_t last;
    const FakeRedis* master;
  };

  void set(std::vector<Range> ranges) {
    std::lock_guard<std::mutex> guard(mutex_);
    ranges_ = std::move(ranges);
  }
  void allOn(const FakeRedis& master) { set({{0, dlock::kClusterSlots - 1, &master}}); }

  std::string reply() const {
    std::lock_guard<std::mutex> guard(mutex_);
    std::vector<std::string> entries;
    for (const auto& range : ranges_) {
      const FakeRedis& master = *range.master;
      const std::string node =
          resp::array({resp::bulk(master.host()), resp::integer(master.port()), resp::bulk("id-" + master.address())});
      entries.push_back(resp::array({resp::integer(range.first), resp::integer(range.last), node}));
    }
    return resp::array(entries);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Range> ranges_;  // guarded by mutex_
};

// A data node: a master (ROLE), its slot map when in a cluster, the scripts as `scripts` says.
Handler dataNode(ScriptAnswers& scripts, const SlotMap* map = nullptr) {
  return [&scripts, map](const Command& command) -> Answer {
    const std::string& name = command.front();
    if (name == "EVALSHA" || name == "EVAL") return scripts.next();
    if (name == "ASKING") return resp::simple("OK");
    if (name == "PING") return resp::simple("PONG");
    if (name == "ROLE") return resp::array({resp::bulk("master"), resp::integer(0), resp::array({})});
    if (map != nullptr && name == "CLUSTER" && command.size() == 2 && command[1] == "SLOTS") return map->reply();
    return resp::error("ERR unknown command '" + name + "'");
  };
}

// A sentinel naming the master at port `master` (the test may change it) for any name. It leaves
// the operator's event subscription unconfirmed: a confirmed one makes SentinelTopology ask the
// sentinels again (a switch may have gone unseen) at a moment the test does not choose, and those
// tests count the times the sentinels are asked.
Handler sentinel(const std::atomic<int>& master) {
  return [&master](const Command& command) -> Answer {
    const std::string& name = command.front();
    if (name == "SENTINEL" && command.size() == 3 && command[1] == "get-master-addr-by-name") {
      return resp::array({resp::bulk("127.0.0.1"), resp::bulk(std::to_string(master.load()))});
    }
    if (name == "SUBSCRIBE" || name == "PSUBSCRIBE") return Answer::silence();
    if (name == "PING") return resp::simple("PONG");
    return resp::error("ERR unknown command '" + name + "'");
  };
}

// How many script calls (EVALSHA or EVAL) reached `node`.
std::size_t scriptCalls(const FakeRedis& node) { return node.count("EVALSHA") + node.count("EVAL"); }

// The commands a node got, without the TIME of each connection's handshake (and clock samples).
std::vector<Command> callCommands(const FakeRedis& node) {
  std::vector<Command> calls;
  for (Command& command : node.commands()) {
    if (command.empty() || command[0] != "TIME") calls.push_back(std::move(command));
  }
  return calls;
}

dlock::SingleOptions singleOn(int port, std::chrono::milliseconds commandTimeout = 1s) {
  dlock::SingleOptions options;
  options.connection.port = port;
  options.connection.commandTimeout = commandTimeout;
  options.pool.size = 1;  // one connection: the one a test closes is the one the next call gets
  return options;
}

// Generous unless the test is about the budget: the retries it grants take milliseconds.
dlock::ClusterOptions clusterOf(const std::vector<const FakeRedis*>& seeds, std::chrono::milliseconds budget = 10s) {
  dlock::ClusterOptions options;
  for (const FakeRedis* seed : seeds) options.seeds.push_back(dlock::ClusterSeed{seed->host(), seed->port()});
  options.retryBudget = budget;
  return options;
}

dlock::SentinelOptions sentinelOf(const FakeRedis& sentinel) {
  dlock::SentinelOptions options;
  options.sentinels = {dlock::SentinelAddress{sentinel.host(), sentinel.port()}};
  options.masterName = "fake";
  // Longer than any test: the unconfirmed subscription (see sentinel()) is not given up meanwhile.
  options.sentinelCommandTimeout = 5s;
  return options;
}

// SentinelTopology asks the sentinels again after a failed call at most this often
// (kMinResolveInterval). A test of such a failure waits it out since the last time they were
// asked; a pause only needs to be at least this long, so a slow machine changes nothing.
constexpr auto kSentinelResolveInterval = 100ms;

// The message of the ConnectionError `call` throws; the test fails when it throws none (and
// doctest reports any other exception).
template <class Call>
std::string connectionErrorOf(Call&& call) {
  try {
    call();
  } catch (const dlock::ConnectionError& error) {
    return error.what();
  }
  FAIL("no ConnectionError was thrown");
  return {};
}

}  // namespace

TEST_SUITE("RedisRetry") {
  // ---- one server --------------------------------------------------------------------------

  TEST_CASE("single server: a refused connection is a ConnectionError") {
    dlock::SingleOperator op(singleOn(dlock::test::closedPort()));
    CHECK_THROWS_AS(op.lock("k", kToken, kTtl), dlock::ConnectionError);
  }

  TEST_CASE("single server: a server that never answers is a ConnectionError after the command timeout") {
    ScriptAnswers scripts{Answer::silence()};
    FakeRedis node(dataNode(scripts));
    dlock::SingleOperator op(singleOn(node.port(), 100ms));
    CHECK_THROWS_AS(op.lock("k", kToken, kTtl), dlock::ConnectionError);
    CHECK(node.waitFor("EVALSHA", 1));  // it was sent, and went unanswered
  }

  TEST_CASE("single server: a pooled connection the server closed while idle is replaced and the call runs once") {
    ScriptAnswers scripts{acquired(1)};
    FakeRedis node(dataNode(scripts));
    dlock::SingleOperator op(singleOn(node.port()));
    REQUIRE(op.lock("first", kToken, kTtl).acquired);
    REQUIRE(node.accepted() == 1);

    node.dropConnections();  // the pool's one connection, idle now, is closed under it
    const dlock::AcquireResult result = op.lock("second", kToken, kTtl);

    CHECK(result.acquired);
    CHECK(node.accepted() == 2);  // replaced once
    CHECK(scriptCalls(node) == 2);  // one per call: nothing ran twice
    CHECK(op.reconnects() == 1);
  }

  TEST_CASE("single server: NOSCRIPT falls back to EVAL") {
    ScriptAnswers scripts{acquired(7)};
    scripts.queue(resp::error("NOSCRIPT No matching script. Please use EVAL."));
    FakeRedis node(dataNode(scripts));
    dlock::SingleOperator op(singleOn(node.port()));

    const dlock::AcquireResult result = op.lock("k", kToken, kTtl);

    CHECK(result.acquired);
    CHECK(result.fencingToken == 7);
    const std::vector<Command> commands = callCommands(node);
    REQUIRE(commands.size() == 2);
    CHECK(commands[0][0] == "EVALSHA");
    CHECK(commands[1][0] == "EVAL");
    CHECK(commands[1][1].find("TIME") != std::string::npos);  // the acquire script's source, not its SHA
    // The same keys and arguments after the script.
    CHECK(std::vector<std::string>(commands[1].begin() + 2, commands[1].end()) ==
          std::vector<std::string>(commands[0].begin() + 2, commands[0].end()));
  }

  TEST_CASE("single server: a not-now reply is a ConnectionError and is not retried") {
    std::string reply;
    SUBCASE("TRYAGAIN") { reply = "TRYAGAIN Multiple keys request during rehashing of slot"; }
    SUBCASE("LOADING") { reply = "LOADING Redis is loading the dataset in memory"; }
    ScriptAnswers scripts{acquired(1)};  // what a second try would get
    scripts.queue(resp::error(reply));
    FakeRedis node(dataNode(scripts));
    dlock::SingleOperator op(singleOn(node.port()));

    CHECK_THROWS_AS(op.lock("k", kToken, kTtl), dlock::ConnectionError);
    CHECK(scriptCalls(node) == 1);
  }

  // ---- cluster -----------------------------------------------------------------------------

  TEST_CASE("cluster: MOVED retries the call on the node named and the next call goes there directly") {
    const std::uint16_t slot = slotOf("k");
    SlotMap map;
    ScriptAnswers scriptsA{acquired(1)};
    ScriptAnswers scriptsB{acquired(1)};
    FakeRedis a(dataNode(scriptsA, &map));
    FakeRedis b(dataNode(scriptsB, &map));
    map.allOn(a);  // and stays so: the node MOVED names is newer than a map that has not caught up
    scriptsA.queue(moved(slot, b));
    dlock::ClusterOperator op(clusterOf({&a}));

    CHECK(op.lock("k", kToken, kTtl).acquired);
    CHECK(scriptCalls(a) == 1);
    CHECK(scriptCalls(b) == 1);

    CHECK(op.lock("k", kToken, kTtl).acquired);  // the same token again: idempotent
    CHECK(scriptCalls(a) == 1);
    CHECK(scriptCalls(b) == 2);
    CHECK(op.nodeFor("k") == b.address());
  }

  TEST_CASE("cluster: ASK sends ASKING then EVAL to the node named without changing the slot map") {
    const std::uint16_t slot = slotOf("k");
    SlotMap map;
    ScriptAnswers scriptsA{acquired(1)};
    ScriptAnswers scriptsB{acquired(1)};
    FakeRedis a(dataNode(scriptsA, &map));
    FakeRedis b(dataNode(scriptsB, &map));
    map.allOn(a);
    scriptsA.queue(resp::error("ASK " + std::to_string(slot) + " " + b.address()));
    dlock::ClusterOperator op(clusterOf({&a}));

    CHECK(op.lock("k", kToken, kTtl).acquired);
    const std::vector<Command> atB = callCommands(b);
    REQUIRE(atB.size() == 2);
    CHECK(atB[0][0] == "ASKING");
    CHECK(atB[1][0] == "EVAL");  // the importing node may not have the script: its source

    CHECK(op.nodeFor("k") == a.address());
    CHECK(op.slotRefreshes() == 1);  // only the first look at the map
    CHECK(op.lock("k", kToken, kTtl).acquired);
    CHECK(scriptCalls(a) == 2);
    CHECK(callCommands(b).size() == 2);
  }

  TEST_CASE("cluster: TRYAGAIN is retried until the node stops answering it") {
    SlotMap map;
    ScriptAnswers scripts{acquired(3)};
    scripts.queue(resp::error("TRYAGAIN Multiple keys request during rehashing of slot"), 2);
    FakeRedis a(dataNode(scripts, &map));
    map.allOn(a);
    dlock::ClusterOperator op(clusterOf({&a}));

    const dlock::AcquireResult result = op.lock("k", kToken, kTtl);

    CHECK(result.acquired);
    CHECK(result.fencingToken == 3);
    CHECK(scriptCalls(a) == 3);
  }

  TEST_CASE("cluster: TRYAGAIN that never stops is a ConnectionError once the retry budget is spent") {
    SlotMap map;
    // Stops after 50: with back-offs of up to 100 ms, far past the 200 ms budget, so a client that
    // ignored the budget would end up acquiring rather than retrying for ever.
    ScriptAnswers scripts{acquired(1)};
    scripts.queue(resp::error("TRYAGAIN Multiple keys request during rehashing of slot"), 50);
    FakeRedis a(dataNode(scripts, &map));
    map.allOn(a);
    dlock::ClusterOperator op(clusterOf({&a}, 200ms));
    op.refreshSlots();  // the budget is the call's, not the first look at the map's

    const std::string message = connectionErrorOf([&] { (void)op.lock("k", kToken, kTtl); });
    CHECK(message.find("TRYAGAIN") != std::string::npos);
  }

  TEST_CASE("cluster: TRYAGAIN is retried no longer than the wait the call runs inside has left (CallBudget)") {
    SlotMap map;
    // With a 10 s retry budget the call would retry past these 50 and acquire; the wait's 200 ms
    // budget ends it first.
    ScriptAnswers scripts{acquired(1)};
    scripts.queue(resp::error("TRYAGAIN Multiple keys request during rehashing of slot"), 50);
    FakeRedis a(dataNode(scripts, &map));
    map.allOn(a);
    dlock::ClusterOperator op(clusterOf({&a}, 10s));
    op.refreshSlots();

    const auto start = std::chrono::steady_clock::now();
    std::string message;
    {
      dlock::detail::CallBudget scope(start + 200ms);
      message = connectionErrorOf([&] { (void)op.lock("k", kToken, kTtl); });
    }
    CHECK(message.find("TRYAGAIN") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < 200ms + 100ms);  // the last pause ends at the deadline
    CHECK(scriptCalls(a) < 50);
  }

  TEST_CASE("cluster: more than 16 redirections is a ConnectionError naming them") {
    const std::uint16_t slot = slotOf("k");
    SlotMap map;
    // Each node sends the call to the other, 20 times each, then takes it: a client without a
    // limit would end up acquiring.
    ScriptAnswers scriptsA{acquired(1)};
    ScriptAnswers scriptsB{acquired(1)};
    FakeRedis a(dataNode(scriptsA, &map));
    FakeRedis b(dataNode(scriptsB, &map));
    map.allOn(a);
    scriptsA.queue(moved(slot, b), 20);
    scriptsB.queue(moved(slot, a), 20);
    dlock::ClusterOperator op(clusterOf({&a}));

    const std::string message = connectionErrorOf([&] { (void)op.lock("k", kToken, kTtl); });
    CHECK(message.find("more than 16 redirections") != std::string::npos);
    CHECK(message.find("MOVED") != std::string::npos);
    CHECK(scriptCalls(a) + scriptCalls(b) == 17);
  }

  TEST_CASE("cluster: after a failover the call follows the slot to the node the slot map names now") {
    SlotMap map;
    ScriptAnswers scriptsA{acquired(1)};
    ScriptAnswers scriptsB{acquired(2)};
    FakeRedis a(dataNode(scriptsA, &map));
    FakeRedis b(dataNode(scriptsB, &map));
    map.allOn(a);
    dlock::ClusterOperator op(clusterOf({&a, &b}));
    REQUIRE(op.lock("k", kToken, kTtl).acquired);  // a pooled connection to A, idle now
    REQUIRE(op.nodeFor("k") == a.address());

    map.allOn(b);  // B, A's replica, promoted; A gone: its connections closed, new ones refused
    a.stop();
    const dlock::AcquireResult result = op.lock("k", kToken, kTtl);

    CHECK(result.acquired);
    CHECK(result.fencingToken == 2);
    CHECK(scriptCalls(b) == 1);
    CHECK(op.nodeFor("k") == b.address());
  }

  TEST_CASE("cluster: a slot no node serves is a ConnectionError naming the slot") {
    const std::uint16_t slot = slotOf("k");
    SlotMap partial;
    SlotMap full;
    ScriptAnswers scripts{acquired(1)};
    // Every slot but the key's for the first 50 looks at the map, then every slot: with back-offs
    // of up to 100 ms, far past the 200 ms budget, so a client that ignored the budget would end
    // up acquiring rather than waiting for ever.
    const Handler node = dataNode(scripts, &partial);
    int looks = 0;  // the node's thread only
    FakeRedis a([&](const Command& command) -> Answer {
      if (command.front() == "CLUSTER" && ++looks > 50) return full.reply();
      return node(command);
    });
    std::vector<SlotMap::Range> ranges;
    if (slot > 0) ranges.push_back({0, static_cast<std::uint16_t>(slot - 1), &a});
    if (slot + 1 < dlock::kClusterSlots) {
      ranges.push_back({static_cast<std::uint16_t>(slot + 1), dlock::kClusterSlots - 1, &a});
    }
    partial.set(ranges);
    full.allOn(a);
    dlock::ClusterOperator op(clusterOf({&a}, 200ms));

    const std::string message = connectionErrorOf([&] { (void)op.lock("k", kToken, kTtl); });
    CHECK(message.find("slot " + std::to_string(slot)) != std::string::npos);
    CHECK(scriptCalls(a) == 0);
  }

  // ---- sentinel ----------------------------------------------------------------------------

  TEST_CASE("sentinel: READONLY sends the operator back to the sentinels and the call once to the master they name") {
    ScriptAnswers scriptsA{acquired(1)};
    ScriptAnswers scriptsB{acquired(2)};
    scriptsA.queue(acquired(1));
    scriptsA.queue(resp::error("READONLY You can't write against a read only replica."));
    FakeRedis a(dataNode(scriptsA));
    FakeRedis b(dataNode(scriptsB));
    std::atomic<int> master{a.port()};
    FakeRedis sentinelNode(sentinel(master));
    dlock::SentinelOperator op(sentinelOf(sentinelNode));
    REQUIRE(op.lock("first", kToken, kTtl).acquired);  // on A, which the sentinels named
    REQUIRE(sentinelNode.count("SENTINEL") == 1);
    std::this_thread::sleep_for(kSentinelResolveInterval + 50ms);

    master = b.port();  // A demoted, B promoted
    const dlock::AcquireResult result = op.lock("k", kToken, kTtl);

    CHECK(result.acquired);
    CHECK(result.fencingToken == 2);
    CHECK(sentinelNode.count("SENTINEL") == 2);
    CHECK(scriptCalls(a) == 2);
    CHECK(scriptCalls(b) == 1);
    CHECK(op.masterAddress() == b.address());
  }

  TEST_CASE("sentinel: READONLY from the master the sentinels name again is retried within the budget, then a ConnectionError") {
    ScriptAnswers scriptsA{resp::error("READONLY You can't write against a read only replica.")};
    scriptsA.queue(acquired(1));
    FakeRedis a(dataNode(scriptsA));
    std::atomic<int> master{a.port()};
    FakeRedis sentinelNode(sentinel(master));
    dlock::SentinelOperator op(sentinelOf(sentinelNode));
    REQUIRE(op.lock("first", kToken, kTtl).acquired);
    REQUIRE(sentinelNode.count("SENTINEL") == 1);
    std::this_thread::sleep_for(kSentinelResolveInterval + 50ms);

    const std::string message = connectionErrorOf([&] { (void)op.lock("k", kToken, kTtl); });
    CHECK(message.find("READONLY") != std::string::npos);
    CHECK(message.find("retried for 1000 ms") != std::string::npos);
    // Tried again after growing pauses (5 ms doubling to 100 ms) for the budget of 1 s, not in a
    // tight loop; the sentinels asked at most once per resolve interval (100 ms), named A each time.
    CHECK(scriptCalls(a) >= 4);
    CHECK(scriptCalls(a) <= 40);
    CHECK(sentinelNode.count("SENTINEL") >= 3);
    CHECK(sentinelNode.count("SENTINEL") <= 12);
    CHECK(op.masterAddress() == a.address());
  }
}
