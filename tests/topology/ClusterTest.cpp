// SPDX-License-Identifier: Apache-2.0
// ClusterOperator against real Redis Clusters (tests/support/ClusterServers): routing over all
// masters, odd keys, batch renewal, a live slot migration under contention from four processes,
// a master killed and failed over, dead seeds.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ChildProcess.h"
#include "ClusterServers.h"
#include "ForkedIncrements.h"
#include "KeysLeftBehind.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/cluster/ClusterOperator.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"

using namespace std::chrono_literals;
using namespace std::string_literals;
using dlock::test::ChildProcess;
using dlock::test::ClusterServers;
using dlock::test::RedisClient;
using dlock::test::extendedFlags;
using Steady = std::chrono::steady_clock;
using dlock::test::eventually;

namespace {

constexpr const char* kPrefix = "dlock:";

// `count` user keys, named `stem` + a number, whose locks live on `master`.
std::vector<std::string> keysOn(const std::vector<std::size_t>& owners, std::size_t master, const std::string& stem,
                                std::size_t count) {
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < count; ++i) {
    const std::string key = stem + std::to_string(i);
    if (owners[dlock::clusterKeyNames(kPrefix, key).slot] == master) keys.push_back(key);
  }
  return keys;
}

dlock::ClusterOptions optionsFor(const ClusterServers& cluster, const std::vector<std::size_t>& seeds) {
  dlock::ClusterOptions options;
  for (const std::size_t seed : seeds) options.seeds.push_back(dlock::ClusterSeed{"127.0.0.1", cluster.port(seed)});
  return options;
}

std::shared_ptr<dlock::ClusterOperator> operatorFor(const ClusterServers& cluster,
                                                    const std::vector<std::size_t>& seeds = {0}) {
  return std::make_shared<dlock::ClusterOperator>(optionsFor(cluster, seeds));
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Subscribers (SSUBSCRIBE) of the release channel of `key` on `node`: a waiter asleep on it is one.
long long shardSubscribers(const ClusterServers& cluster, std::size_t node, const std::string& key) {
  auto client = cluster.client(node);
  const std::string channel = std::string(kPrefix) + "{" + key + "}:released";
  std::vector<std::string> command = {"PUBSUB", "SHARDNUMSUB", channel};
  for (const auto& wake : client.ok({"PUBSUB", "SHARDCHANNELS", channel + ":*"}).elements) command.push_back(wake.str);
  const auto reply = client.ok(command);
  long long subscribers = 0;
  for (std::size_t i = 1; i < reply.elements.size(); i += 2) subscribers += reply.elements[i].integer;
  return subscribers;  // the release channel's and the waiters' wake-up channels' (`...:released:<listener>`)
}

// A waiter that rechecks a held key only after a minute, with a lease of a minute: when it gets
// the key within seconds of a release, the release message woke it.
std::shared_ptr<dlock::ILock> notifiedWaiter(std::shared_ptr<dlock::IOperator> backend) {
  return dlock::LockBuilder()
      .backend(std::move(backend))
      .leaseTime(60s)
      .waitStrategy(std::make_shared<dlock::NotifyWait>(60s))
      .build();
}

// How long a release message may take to arrive: a round trip, on a busy machine.
constexpr auto kHandOffBound = 5s;

long long counterValue(RedisClient& client, const std::string& key) {
  const auto value = client.ok({"GET", key});
  return value.isNil() ? 0 : std::stoll(value.str);
}

}  // namespace

TEST_SUITE("ClusterOperator") {

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt
  TEST_CASE("a cluster lock inherited across fork(): 4 children x 100 locked increments through it end exact") {
    ClusterServers cluster;
    dlock::test::RedisProcess counter;
    std::shared_ptr<dlock::IOperator> backend = operatorFor(cluster);
    auto lock = dlock::LockBuilder().backend(backend).build();
    dlock::test::exerciseBeforeFork(*lock, "fork-counter-lock");
    dlock::test::checkForkedIncrements(lock, backend, "fork-counter-lock", counter, 2, 4, 100, 60s);
    REQUIRE(lock->tryLock("fork-counter-lock", 5s));  // the parent is unaffected
    lock->unlock("fork-counter-lock");
  }
#endif
  TEST_CASE("options are checked before anything is sent") {
    dlock::ClusterOptions none;
    CHECK_THROWS_AS(dlock::ClusterOperator{none}, dlock::ConfigError);
    dlock::ClusterOptions braces;
    braces.seeds = {{"127.0.0.1", 7000}};
    braces.keyPrefix = "app{x}:";
    CHECK_THROWS_AS(dlock::ClusterOperator{braces}, dlock::ConfigError);
    dlock::ClusterOptions db;
    db.seeds = {{"127.0.0.1", 7000}};
    db.connection.db = 2;
    CHECK_THROWS_AS(dlock::ClusterOperator{db}, dlock::ConfigError);
    dlock::ClusterOptions budget;
    budget.seeds = {{"127.0.0.1", 7000}};
    budget.retryBudget = 0ms;
    CHECK_THROWS_AS(dlock::ClusterOperator{budget}, dlock::ConfigError);
    const auto fromUri =
        dlock::connect("redis+cluster://user:secret@127.0.0.1:7000,127.0.0.1:7001?prefix=app:&lazy_connect=true");
    CHECK(fromUri->describe() == "redis+cluster://127.0.0.1:7000,127.0.0.1:7001");
  }

  TEST_CASE("with every seed dead, a call fails with ConnectionError naming them") {
    const int first = dlock::test::freeLoopbackPort();
    const int second = dlock::test::freeLoopbackPort();
    const std::string uri = "redis+cluster://127.0.0.1:" + std::to_string(first) + ",127.0.0.1:" + std::to_string(second);
    try {
      (void)dlock::connect(uri);  // connect() asks the seeds for the slot map at once
      FAIL("connect to a dead cluster returned");
    } catch (const dlock::ConnectionError& error) {
      const std::string message = error.what();
      CHECK(message.find("127.0.0.1:" + std::to_string(first)) != std::string::npos);
      CHECK(message.find("check the host and port in the URI") != std::string::npos);
    }
    auto backend = dlock::connect(uri, dlock::ConnectOptions{true});
    const auto start = Steady::now();
    try {
      (void)backend->lock("k", "token", 1000ms);
      FAIL("lock on a dead cluster returned");
    } catch (const dlock::ConnectionError& error) {
      const std::string message = error.what();
      CHECK(message.find("127.0.0.1:" + std::to_string(first)) != std::string::npos);
      CHECK(message.find("127.0.0.1:" + std::to_string(second)) != std::string::npos);
    }
    CHECK(Steady::now() - start < 5s);
  }

  TEST_CASE("a cluster node that answers but serves no slots: ConnectionError after the retry budget, as for an "
            "unowned slot") {
    dlock::test::RedisProcess::Options nodeOptions;
    nodeOptions.config = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                          "cluster-port " + std::to_string(dlock::test::freeLoopbackPort())};
    dlock::test::RedisProcess node(nodeOptions);
    dlock::ClusterOptions options;
    options.seeds = {{"127.0.0.1", node.port()}};
    options.retryBudget = 300ms;
    dlock::ClusterOperator backend(options);
    const auto start = Steady::now();
    try {
      (void)backend.lock("k", "token", 1000ms);
      FAIL("lock on a cluster without slots returned");
    } catch (const dlock::ConnectionError& error) {
      CHECK(std::string(error.what()).find("serves slot " + std::to_string(dlock::clusterKeyNames(kPrefix, "k").slot)) !=
            std::string::npos);
    }
    const auto waited = Steady::now() - start;
    CHECK(waited >= 250ms);
    CHECK(waited < 3s);
    CHECK_THROWS_AS((void)backend.nodeFor("k"), dlock::ConnectionError);
    CHECK_THROWS_AS((void)backend.watch("k"), dlock::ConnectionError);
    // Slots assigned: the same operator finds them.
    RedisClient(node.host(), node.port()).ok({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
    CHECK(dlock::test::recovers([&] { return backend.lock("k", "token", 1000ms).acquired; }));
    CHECK(backend.nodeFor("k") == "127.0.0.1:" + std::to_string(node.port()));
  }

  TEST_CASE("key slots agree with the server's CLUSTER KEYSLOT, binary keys included") {
    dlock::test::RedisProcess::Options options;
    options.config = {"cluster-enabled yes", "cluster-config-file nodes.conf",
                      "cluster-port " + std::to_string(dlock::test::freeLoopbackPort())};
    dlock::test::RedisProcess node(options);
    RedisClient client(node.host(), node.port());
    std::vector<std::string> keys = {"123456789",
                                     "{user1000}.following",
                                     "{user1000}.followers",
                                     "foo{}{bar}",
                                     "foo{{bar}}zap",
                                     "foo{bar}{zap}",
                                     "{}",
                                     "}{",
                                     "{",
                                     "}",
                                     "somekey",
                                     "\0"s,
                                     "\r\n",
                                     "a\0{b}"s,
                                     "{\0}"s,
                                     "\xff\xfe{\x80}"};
    std::mt19937 random(20240611);
    const std::string alphabet = "{}ab\0\r\n\xff:"s;
    for (int i = 0; i < 300; ++i) {
      std::string key(random() % 24, '\0');
      for (auto& c : key) {
        // Mostly braces and a few other bytes, so tags of every shape occur; some fully random bytes.
        c = i % 3 == 0 ? static_cast<char>(random() % 256) : alphabet[random() % alphabet.size()];
      }
      keys.push_back(key);
    }
    for (const auto& key : keys) {
      CAPTURE(key);
      CHECK(dlock::keyHashSlot(key) == client.ok({"CLUSTER", "KEYSLOT", key}).integer);
    }
    // The server agrees that every lock's names share one slot, odd user keys included.
    for (const auto& key : {"}x"s, "{}"s, "a{b}c"s, "x}{y"s, "\0{\r\n}"s, "plain"s, "{user1000}.following"s}) {
      CAPTURE(key);
      const auto names = dlock::clusterKeyNames(kPrefix, key);
      CHECK(client.ok({"CLUSTER", "KEYSLOT", names.lock}).integer == names.slot);
      CHECK(client.ok({"CLUSTER", "KEYSLOT", names.fence}).integer == names.slot);
      CHECK(client.ok({"CLUSTER", "KEYSLOT", names.channel}).integer == names.slot);
    }
    // Control: the plain `<prefix>{<key>}` names of "}x" would be split across two slots.
    CHECK(client.ok({"CLUSTER", "KEYSLOT", "dlock:{}x}"}).integer !=
          client.ok({"CLUSTER", "KEYSLOT", "dlock:{}x}:fence"}).integer);
  }

  TEST_CASE("keys on all three masters lock, unlock, wake waiters and renew") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    REQUIRE(masters.size() == 3);
    std::vector<std::string> keys;
    for (const std::size_t master : masters) keys.push_back(keysOn(owners, master, "spread-", 1).front());

    auto holderBackend = operatorFor(cluster, {masters[0]});
    auto waiterBackend = operatorFor(cluster, {masters[1]});
    for (std::size_t i = 0; i < keys.size(); ++i) CHECK(holderBackend->nodeFor(keys[i]) == cluster.address(masters[i]));

    {  // lock and unlock go to the key's master
      for (std::size_t i = 0; i < keys.size(); ++i) {
        CAPTURE(keys[i]);
        const auto taken = holderBackend->lock(keys[i], "token-a", 5000ms);
        REQUIRE(taken.acquired);
        RedisClient owner = cluster.client(masters[i]);  // no redirection: the keys are there
        CHECK(owner.ok({"GET", "dlock:{" + keys[i] + "}"}).str == "token-a");
        CHECK(owner.ok({"GET", "dlock:{" + keys[i] + "}:fence"}).str == std::to_string(taken.fencingToken));
        CHECK_FALSE(waiterBackend->lock(keys[i], "token-b", 5000ms).acquired);
        CHECK(holderBackend->inspect(keys[i]).held);
        CHECK_FALSE(holderBackend->unlock(keys[i], "token-b").released);
        CHECK(holderBackend->unlock(keys[i], "token-a").released);
        CHECK(owner.ok({"EXISTS", "dlock:{" + keys[i] + "}"}).integer == 0);
        CHECK(waiterBackend->lock(keys[i], "token-b", 5000ms).fencingToken > taken.fencingToken);
        CHECK(waiterBackend->unlock(keys[i], "token-b").released);
      }
    }

    {  // a release reaches the waiters of its key through sharded pub/sub on its master
      for (std::size_t i = 0; i < keys.size(); ++i) {
        CAPTURE(keys[i]);
        REQUIRE(holderBackend->lock(keys[i], "token-a", 10000ms).acquired);
        auto watch = waiterBackend->watch(keys[i]);
        REQUIRE(watch != nullptr);
        CHECK_FALSE(watch->waitForRelease(50ms));
        REQUIRE_FALSE(waiterBackend->lock(keys[i], "token-w", 10000ms).acquired);  // a waiter's try: registered
        const auto released = holderBackend->unlock(keys[i], "token-a");
        CHECK(released.released);
        CHECK(released.notified == 1);  // the waiter's SSUBSCRIBE on that master
        const auto start = Steady::now();
        CHECK(watch->waitForRelease(dlock::test::kEventBudget));
        CHECK(Steady::now() - start < kHandOffBound);
      }
      // Through ILock: waiters on every master acquire right after the release, well before the
      // holder's lease would end and before their recheck.
      auto holder = dlock::LockBuilder().backend(holderBackend).leaseTime(60s).build();
      auto waiter = notifiedWaiter(waiterBackend);
      for (const auto& key : keys) REQUIRE(holder->tryLock(key));
      std::vector<Steady::time_point> acquiredAt(keys.size());
      std::vector<int> acquired(keys.size(), 0);
      std::vector<std::thread> waiters;
      for (std::size_t i = 0; i < keys.size(); ++i) {
        waiters.emplace_back([&, i] {
          if (waiter->tryLock(keys[i], 20s)) {
            acquiredAt[i] = Steady::now();
            acquired[i] = 1;
            waiter->unlock(keys[i]);
          }
        });
      }
      // Each waiter attempted, subscribed on its key's master and attempted again (registered): asleep.
      CHECK(eventually([&] {
        if (waiter->stats().attempts < 2 * keys.size()) return false;
        for (std::size_t i = 0; i < keys.size(); ++i) {
          auto master = cluster.client(masters[i]);
          if (shardSubscribers(cluster, masters[i], keys[i]) < 1 || !dlock::test::waiterRegistered(master, keys[i])) return false;
        }
        return true;
      }));
      const auto releasedAt = Steady::now();
      for (const auto& key : keys) holder->unlock(key);
      for (auto& thread : waiters) thread.join();
      for (std::size_t i = 0; i < keys.size(); ++i) {
        CAPTURE(keys[i]);
        REQUIRE(acquired[i] == 1);
        CHECK(acquiredAt[i] - releasedAt < kHandOffBound);
      }
    }

    {  // the watchdog renews leases on every master
      auto lock = dlock::LockBuilder().backend(holderBackend).watchdogLease(1000ms).build();
      for (const auto& key : keys) REQUIRE(lock->tryLock(key));
      // Eight renewals of each key, one every 333 ms: more than 2.5 leases, only renewals kept them.
      CHECK(eventually([&] { return lock->stats().renewals >= 8 * keys.size(); }));
      for (std::size_t i = 0; i < keys.size(); ++i) {
        CAPTURE(keys[i]);
        CHECK(lock->isHeld(keys[i]));
        const auto pttl = cluster.client(masters[i]).ok({"PTTL", "dlock:{" + keys[i] + "}"}).integer;
        CHECK(pttl > 0);
        CHECK(pttl <= 1000);
        CHECK_FALSE(waiterBackend->lock(keys[i], "token-b", 1000ms).acquired);
      }
      const auto stats = lock->stats();
      CHECK(stats.renewals >= 3 * keys.size());
      CHECK(stats.lostLeases == 0);
      for (const auto& key : keys) lock->unlock(key);
    }
  }

  TEST_CASE("10,000 distinct keys locked and released leave no key without a TTL on any master, and owner labels show") {
    ClusterServers cluster;
    std::vector<RedisClient> servers;
    for (const std::size_t master : cluster.masters()) servers.push_back(cluster.client(master));
    REQUIRE(servers.size() == 3);
    dlock::test::checkNoKeyLeftWithoutTtl(dlock::connect(cluster.uri()), servers);
    for (auto& server : servers) CHECK(server.ok({"DBSIZE"}).integer > 0);  // the keys spread over every master
  }

  TEST_CASE("user keys with braces and other odd bytes keep the lock and its fence in one slot") {
    ClusterServers cluster;
    auto backend = operatorFor(cluster);
    const std::vector<std::string> keys = {"}x",   "{",    "}",         "{}",     "a{b}c",
                                           "x}{y", "{{}}", "\0{\r\n}"s, "%s{%n}", "{user1000}.following"};
    const auto owners = cluster.slotOwners();
    std::map<std::string, std::uint64_t> raised;  // the fence each key was raised to
    for (const auto& key : keys) {
      CAPTURE(key);
      const auto taken = backend->lock(key, "token-a", 10000ms);
      REQUIRE(taken.acquired);
      CHECK_FALSE(backend->lock(key, "token-b", 10000ms).acquired);
      // Both names on the slot's master, read without redirection.
      const auto names = dlock::clusterKeyNames(kPrefix, key);
      RedisClient owner = cluster.client(owners[names.slot]);
      CHECK(owner.ok({"GET", names.lock}).str == "token-a");
      CHECK(owner.ok({"GET", names.fence}).str == std::to_string(taken.fencingToken));
      CHECK(backend->inspect(key).held);
      CHECK(backend->raiseFence(key, taken.fencingToken + 5) == taken.fencingToken + 5);
      raised[key] = taken.fencingToken + 5;
    }
    std::vector<dlock::LeaseRef> leases;
    for (const auto& key : keys) leases.push_back(dlock::LeaseRef{key, "token-a"});
    const auto extended = extendedFlags(backend->extendAll(leases, 20000ms));
    CHECK(std::count(extended.begin(), extended.end(), true) == static_cast<long>(keys.size()));
    for (const auto& key : keys) {
      CAPTURE(key);
      CHECK(backend->unlock(key, "token-a").released);
      CHECK(backend->lock(key, "token-c", 1000ms).fencingToken > raised[key]);
    }
  }

  TEST_CASE("extendAll renews leases spread over the masters in one call, answers in order") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    auto backend = operatorFor(cluster);
    std::vector<std::string> keys;
    for (const std::size_t master : masters) {
      for (const auto& key : keysOn(owners, master, "batch-" + std::to_string(master) + "-", 3)) keys.push_back(key);
    }
    std::shuffle(keys.begin(), keys.end(), std::mt19937(7));
    for (const auto& key : keys) REQUIRE(backend->lock(key, "token", 2000ms).acquired);
    std::vector<dlock::LeaseRef> leases;
    for (const auto& key : keys) leases.push_back(dlock::LeaseRef{key, "token"});
    leases[4].token = "not-the-owner";
    (void)backend->extendAll(leases, 30000ms);  // scripts cached on every node by now

    std::vector<long long> before;
    std::vector<long long> movedBefore;
    for (const std::size_t master : masters) {
      before.push_back(cluster.client(master).commandCalls()["evalsha"]);
      movedBefore.push_back(cluster.errorCount(master, "MOVED"));
    }
    const auto extended = extendedFlags(backend->extendAll(leases, 30000ms));
    REQUIRE(extended.size() == keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
      CAPTURE(keys[i]);
      CHECK(extended[i] == (i != 4));
      const auto pttl = cluster.client(owners[dlock::clusterKeyNames(kPrefix, keys[i]).slot])
                            .ok({"PTTL", "dlock:{" + keys[i] + "}"})
                            .integer;
      CHECK(pttl > (i != 4 ? 20000 : -1000));
      CHECK(pttl <= (i != 4 ? 30000 : 2000));
    }
    // Each master got exactly its own three renewals: routed by slot, no redirection.
    for (std::size_t m = 0; m < masters.size(); ++m) {
      CHECK(cluster.client(masters[m]).commandCalls()["evalsha"] - before[m] == 3);
      CHECK(cluster.errorCount(masters[m], "MOVED") == movedBefore[m]);
    }
  }

  TEST_CASE("a half-migrated slot: ASK to the target, TRYAGAIN up to the budget, MOVED once it is handed over") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const std::size_t source = masters[0];
    const std::size_t target = masters[1];
    const std::string key = keysOn(owners, source, "ask-", 1).front();
    const std::uint16_t slot = dlock::clusterKeyNames(kPrefix, key).slot;
    auto options = optionsFor(cluster, {masters[2]});
    options.retryBudget = 400ms;
    auto backend = std::make_shared<dlock::ClusterOperator>(options);
    auto watcherBackend = operatorFor(cluster, {masters[2]});

    auto lateBackend = operatorFor(cluster, {masters[2]});
    REQUIRE(lateBackend->nodeFor(key) == cluster.address(source));  // its map, soon stale

    const auto first = backend->lock(key, "token-1", 30000ms);
    REQUIRE(first.acquired);
    auto watch = watcherBackend->watch(key);  // subscribed on the source

    REQUIRE(cluster.openMigration(slot, target) == source);
    cluster.moveKeys(slot, source, target);
    // Lock and fence now sit on the target, which serves them only after ASKING.
    CHECK(cluster.client(source).ok({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 0);
    CHECK(cluster.client(target).ok({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)}).integer == 2);

    // The source no longer has the key: ASK, and the release runs on the target after ASKING.
    const auto askBefore = cluster.errorCount(source, "ASK");
    CHECK(backend->inspect(key).held);
    CHECK(backend->extend(key, "token-1", 30000ms));
    CHECK(backend->unlock(key, "token-1").released);
    CHECK(cluster.errorCount(source, "ASK") >= askBefore + 3);

    // A free lock cannot be taken while its fence sits on the target of an open slot: the target
    // answers TRYAGAIN ("multiple keys, some missing") until the budget is spent.
    const auto start = Steady::now();
    CHECK_THROWS_AS((void)backend->lock(key, "token-2", 30000ms), dlock::ConnectionError);
    const auto waited = Steady::now() - start;
    CHECK(waited >= 350ms);
    CHECK(waited < 3s);
    CHECK(cluster.errorCount(target, "TRYAGAIN") > 0);

    // Handed over: MOVED, a refreshed map, and the fence carried on.
    cluster.finishMigration(slot, source, target);
    const auto movedBefore = cluster.errorCount(source, "MOVED");
    const auto taken = backend->lock(key, "token-2", 30000ms);
    REQUIRE(taken.acquired);
    CHECK(taken.fencingToken > first.fencingToken);
    CHECK(cluster.errorCount(source, "MOVED") == movedBefore + 1);
    CHECK(backend->nodeFor(key) == cluster.address(target));

    // The watch made on the source follows the slot once its operator's map shows the move.
    watcherBackend->refreshSlots();
    CHECK(watch->waitForRelease(dlock::test::kEventBudget));  // re-subscribed on the target: a release may have been missed
    CHECK_FALSE(watch->waitForRelease(50ms));
    // A new watch from a stale map: SSUBSCRIBE on the source meets MOVED, the map is refreshed and
    // the subscription lands on the target.
    const auto lateMovedBefore = cluster.errorCount(source, "MOVED");
    auto late = lateBackend->watch(key);
    CHECK(cluster.errorCount(source, "MOVED") == lateMovedBefore + 1);
    CHECK(lateBackend->nodeFor(key) == cluster.address(target));
    // A release wakes one waiting process (the one whose try registered first), on the target.
    REQUIRE_FALSE(watcherBackend->lock(key, "token-w", 10000ms).acquired);
    auto released = backend->unlock(key, "token-2");
    CHECK(released.released);
    CHECK(released.notified == 1);
    CHECK(watch->waitForRelease(dlock::test::kEventBudget));
    REQUIRE(backend->lock(key, "token-3", 30000ms).acquired);
    REQUIRE_FALSE(lateBackend->lock(key, "token-l", 10000ms).acquired);
    released = backend->unlock(key, "token-3");
    CHECK(released.notified == 1);
    CHECK(late->waitForRelease(dlock::test::kEventBudget));
  }

  TEST_CASE("a watch whose node hands its slot over subscribes again on the new owner, its map stale till then") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const std::size_t source = masters[0];
    const std::size_t target = masters[1];
    const std::string key = keysOn(owners, source, "handed-", 1).front();
    const std::uint16_t slot = dlock::clusterKeyNames(kPrefix, key).slot;
    auto watcherBackend = operatorFor(cluster, {masters[2]});
    auto holderBackend = operatorFor(cluster, {masters[2]});
    auto watch = watcherBackend->watch(key);  // subscribed on the source
    CHECK_FALSE(watch->waitForRelease(50ms));

    const auto movedBefore = cluster.errorCount(source, "MOVED");
    cluster.migrateSlot(slot, target);
    // The source drops the channel with the slot: the waiter wakes, as for a release, and the
    // watch subscribes again, reporting a release it may have missed. Nothing told the watcher's
    // operator of the move: SSUBSCRIBE on the source meets MOVED, and the watch lands on the
    // target. (The wake and the new subscription are one report or two, depending on whether the
    // drop arrived before the call.)
    CHECK(watch->waitForRelease(dlock::test::kEventBudget));
    CHECK(eventually([&] { return shardSubscribers(cluster, target, key) >= 1; }));  // subscribed there
    for (int i = 0; i < 2 && watch->waitForRelease(500ms); ++i) {  // its report, if separate, is close behind
    }
    CHECK(cluster.errorCount(source, "MOVED") == movedBefore + 1);
    CHECK(watcherBackend->nodeFor(key) == cluster.address(target));
    CHECK_FALSE(watch->waitForRelease(50ms));
    // And it hears the next release there.
    REQUIRE(holderBackend->lock(key, "token", 10000ms).acquired);
    REQUIRE_FALSE(watcherBackend->lock(key, "token-w", 10000ms).acquired);  // a waiter's try: registered
    const auto released = holderBackend->unlock(key, "token");
    CHECK(released.released);
    CHECK(released.notified == 1);
    const auto start = Steady::now();
    CHECK(watch->waitForRelease(dlock::test::kEventBudget));
    CHECK(Steady::now() - start < kHandOffBound);
  }

  TEST_CASE("a slot migrated live while four processes contend for its key: no errors, exact count") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const std::size_t source = masters[0];
    const std::size_t target = masters[1];
    const std::size_t counterNode = masters[2];
    const std::string key = keysOn(owners, source, "migrating-", 1).front();
    const std::uint16_t slot = dlock::clusterKeyNames(kPrefix, key).slot;
    // The counter stays put on a third master, which the workers also use as their only seed (the
    // worker reads the counter through a plain client of its URI's host).
    std::string counter;
    for (int i = 0; counter.empty(); ++i) {
      const std::string candidate = "counter-" + std::to_string(i);
      if (owners[dlock::keyHashSlot(candidate)] == counterNode) counter = candidate;
    }
    const std::string uri = "redis+cluster://" + cluster.address(counterNode) + "?command_timeout=3s";
    RedisClient counterClient = cluster.client(counterNode);

    constexpr int kWorkers = 4;
    constexpr int kEach = 400;
    dlock::test::TempDir dir;
    std::vector<std::unique_ptr<ChildProcess>> workers;
    for (int w = 0; w < kWorkers; ++w) {
      const std::string base = dir.file("worker-" + std::to_string(w));
      workers.push_back(std::make_unique<ChildProcess>(ChildProcess::Options{
          {DLOCK_TEST_WORKER, "increment", uri, key, counter, std::to_string(kEach), base + ".out"},
          {},
          base + ".log",
          false}));
    }
    const auto countedBy = [&](long long wanted, std::chrono::milliseconds budget) {
      const auto deadline = Steady::now() + budget;
      while (counterValue(counterClient, counter) < wanted && Steady::now() < deadline)
        std::this_thread::sleep_for(10ms);
      return counterValue(counterClient, counter);
    };
    REQUIRE(countedBy(100, 30s) >= 100);

    const auto errors = [&](std::size_t node) {
      return cluster.errorCount(node, "ASK") + cluster.errorCount(node, "TRYAGAIN");
    };
    const auto movedBefore = cluster.errorCount(source, "MOVED");
    const auto halfMovedBefore = errors(source) + errors(target);
    cluster.migrateSlot(slot, target, 150ms);
    const long long countAtHandOver = counterValue(counterClient, counter);

    std::vector<int> exits;
    for (const auto& worker : workers) exits.push_back(worker->waitFor(120s).value_or(-1));  // -1: still running
    for (int w = 0; w < kWorkers; ++w) {
      const std::string base = dir.file("worker-" + std::to_string(w));
      CAPTURE(readFile(base + ".log"));
      CHECK(exits[static_cast<std::size_t>(w)] == 0);
    }
    MESSAGE("count at hand-over " << countAtHandOver << " of " << kWorkers * kEach << "; ASK+TRYAGAIN +"
                                  << errors(source) + errors(target) - halfMovedBefore << ", MOVED +"
                                  << cluster.errorCount(source, "MOVED") - movedBefore);
    CHECK(counterValue(counterClient, counter) == kWorkers * kEach);
    // The workers were still at it when the slot was handed over, and met it half-moved.
    CHECK(countAtHandOver < kWorkers * kEach);
    CHECK(errors(source) + errors(target) > halfMovedBefore);
    CHECK(cluster.errorCount(source, "MOVED") > movedBefore);
    CHECK(cluster.ownerOf(slot) == target);

    // Every increment saw the previous one, and fencing tokens grew with the count.
    std::vector<std::pair<long long, unsigned long long>> seen;  // (counter seen, fencing token)
    for (int w = 0; w < kWorkers; ++w) {
      std::ifstream in(dir.file("worker-" + std::to_string(w) + ".out"));
      long long value = 0;
      unsigned long long fence = 0;
      while (in >> value >> fence) seen.emplace_back(value, fence);
    }
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen.size() == static_cast<std::size_t>(kWorkers * kEach));
    for (std::size_t i = 0; i < seen.size(); ++i) {
      if (seen[i].first != static_cast<long long>(i)) {
        FAIL_CHECK("increment " << i << " saw counter " << seen[i].first);
        break;
      }
      if (i > 0 && seen[i].second <= seen[i - 1].second) {
        FAIL_CHECK("fencing token " << seen[i].second << " after " << seen[i - 1].second << " at increment " << i);
        break;
      }
    }
    // The fence counter moved with its slot.
    CHECK(cluster.client(target).ok({"GET", "dlock:{" + key + "}:fence"}).str == std::to_string(seen.back().second));
  }

  TEST_CASE(
      "a master killed with SIGKILL: its replica takes over and clients continue, with only ConnectionError "
      "meanwhile") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const std::size_t victim = masters[0];
    std::vector<std::string> keys;
    for (const std::size_t master : masters) {
      for (const auto& key : keysOn(owners, master, "failover-", 2)) keys.push_back(key);
    }
    const std::string victimKey = keys.front();

    auto options = optionsFor(cluster, {masters[1], masters[2]});
    options.retryBudget = 300ms;
    options.connection.connectTimeout = 300ms;
    options.connection.commandTimeout = 500ms;
    auto backend = std::make_shared<dlock::ClusterOperator>(options);
    auto waiterBackend = std::make_shared<dlock::ClusterOperator>(options);
    {
      // The waiter's operator subscribes on the victim before it dies.
      REQUIRE(backend->lock(victimKey, "before", 5000ms).acquired);
      auto watch = waiterBackend->watch(victimKey);
      REQUIRE_FALSE(waiterBackend->lock(victimKey, "waiter", 5000ms).acquired);  // a waiter's try: registered
      REQUIRE(backend->unlock(victimKey, "before").notified == 1);
      CHECK(watch->waitForRelease(dlock::test::kEventBudget));
    }

    struct Outcome {
      Steady::time_point start;
      std::size_t key;
      int kind;  // 0 answered, 1 ConnectionError, 2 anything else
      std::string error;
      Steady::time_point end{};
    };
    std::mutex mutex;
    std::vector<Outcome> outcomes;
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int t = 0; t < 2; ++t) {
      clients.emplace_back([&, t] {
        for (std::size_t n = static_cast<std::size_t>(t); !stop; ++n) {
          const std::size_t k = n % keys.size();
          const std::string token = "t" + std::to_string(t) + "-" + std::to_string(n);
          Outcome outcome{Steady::now(), k, 0, {}};
          try {
            if (backend->lock(keys[k], token, 2000ms).acquired) (void)backend->unlock(keys[k], token);
          } catch (const dlock::ConnectionError& error) {
            outcome.kind = 1;
            outcome.error = error.what();
          } catch (const std::exception& error) {
            outcome.kind = 2;
            outcome.error = error.what();
          }
          outcome.end = Steady::now();
          {
            std::lock_guard<std::mutex> guard(mutex);
            outcomes.push_back(std::move(outcome));
          }
          std::this_thread::sleep_for(5ms);
        }
      });
    }
    const auto answered = [&](const auto& counts) {
      std::lock_guard<std::mutex> guard(mutex);
      return static_cast<std::size_t>(std::count_if(outcomes.begin(), outcomes.end(), counts));
    };
    CHECK(eventually([&] { return answered([](const Outcome& o) { return o.kind == 0; }) >= 10; }));
    const auto killedAt = Steady::now();
    cluster.kill(victim);
    std::size_t promoted = victim;
    try {
      promoted = cluster.waitForFailover(victim, 30s);
    } catch (...) {
      stop = true;
      for (auto& thread : clients) thread.join();
      throw;
    }
    const auto failedOverAt = Steady::now();
    // The clients settle within their own timeouts (a 300 ms retry budget, 300 ms connect and
    // 500 ms command timeouts, a reconnect back-off of at most 1 s); kSettle leaves room for a busy
    // machine. Calls that start after it must all be answered; they run until some did on the
    // victim's slots.
    constexpr auto kSettle = 5s;
    const auto settledAt = failedOverAt + kSettle;
    CHECK(eventually(
        [&] {
          return answered([&](const Outcome& o) {
                   return o.start >= settledAt &&
                          owners[dlock::clusterKeyNames(kPrefix, keys[o.key]).slot] == victim;
                 }) >= 10;
        },
        kSettle + dlock::test::kEventBudget));
    stop = true;
    for (auto& thread : clients) thread.join();

    CHECK(promoted != victim);
    // The promoted replica had no scripts cached: NOSCRIPT, then EVAL.
    CHECK(cluster.errorCount(promoted, "NOSCRIPT") > 0);
    CHECK(backend->nodeFor(victimKey) == cluster.address(promoted));
    std::size_t before = 0, during = 0, after = 0, afterOnVictim = 0, connectionErrors = 0;
    for (const auto& outcome : outcomes) {
      if (outcome.kind == 2) FAIL_CHECK("not a ConnectionError: " << outcome.error);
      if (outcome.kind == 1) ++connectionErrors;
      if (outcome.end < killedAt) {  // a call still running at the kill belongs to the failover
        ++before;
        if (outcome.kind != 0) FAIL_CHECK("before the kill: " << outcome.error);
      } else if (outcome.start < settledAt) {
        ++during;
      } else {
        ++after;
        if (outcome.kind != 0) FAIL_CHECK("after the failover: " << outcome.error);
        if (outcome.kind == 0 && owners[dlock::clusterKeyNames(kPrefix, keys[outcome.key]).slot] == victim) {
          ++afterOnVictim;
        }
      }
    }
    MESSAGE("calls: " << before << " before the kill, " << during << " during the failover (" << connectionErrors
                      << " ConnectionError), " << after << " after; failover took "
                      << std::chrono::duration_cast<std::chrono::milliseconds>(failedOverAt - killedAt).count()
                      << " ms");
    CHECK(before > 0);
    CHECK(after > 0);
    CHECK(afterOnVictim > 0);

    // A waiter whose subscription died with the victim hands off on the promoted master.
    auto holder = dlock::LockBuilder().backend(backend).leaseTime(60s).build();
    auto waiter = notifiedWaiter(waiterBackend);
    REQUIRE(holder->tryLock(victimKey, 5s));
    std::atomic<bool> acquired{false};
    Steady::time_point acquiredAt;
    std::thread waiting([&] {
      try {
        if (waiter->tryLock(victimKey, 20s)) {
          acquiredAt = Steady::now();
          acquired = true;
          waiter->unlock(victimKey);
        }
      } catch (const std::exception& error) {
        MESSAGE("waiter: " << error.what());
      }
    });
    // Asleep on its subscription, moved to the promoted master.
    CHECK(eventually([&] {
      return waiter->stats().attempts >= 3 && shardSubscribers(cluster, promoted, victimKey) >= 1;
    }));
    const auto releasedAt = Steady::now();
    holder->unlock(victimKey);
    waiting.join();
    REQUIRE(acquired);
    CHECK(acquiredAt - releasedAt < kHandOffBound);
  }

  TEST_CASE("reconnects() never goes down, also when a master with a reconnected subscriber steps down") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const std::size_t master = masters[0];
    const auto replicas = cluster.replicasOf(master);
    REQUIRE_FALSE(replicas.empty());
    const std::string key = keysOn(owners, master, "reconnects-", 1).front();
    const std::uint16_t slot = dlock::clusterKeyNames(kPrefix, key).slot;
    auto backend = operatorFor(cluster, {masters[1]});
    auto watch = backend->watch(key);  // a subscriber on `master`
    REQUIRE(backend->reconnects() == 0);
    cluster.client(master).ok({"CLIENT", "KILL", "TYPE", "pubsub"});
    CHECK(eventually([&] { return backend->reconnects() >= 1; }));
    const auto reconnected = backend->reconnects();
    REQUIRE(reconnected >= 1);

    // A graceful failover: the master becomes a replica, and the operator's map drops it. Redis
    // gives up a manual failover it cannot finish within its own timeout (5 s, CLUSTER_MF_TIMEOUT),
    // as a busy machine can make it do: then it is asked again.
    constexpr auto kManualFailoverTimeout = 5s;
    CHECK(eventually(
        [&] {
          (void)cluster.client(replicas.front()).command({"CLUSTER", "FAILOVER"});
          return eventually([&] { return cluster.ownerOf(slot) == replicas.front(); }, kManualFailoverTimeout * 2);
        },
        kManualFailoverTimeout * 12));
    REQUIRE(cluster.ownerOf(slot) == replicas.front());
    cluster.waitUntilStable();
    backend->refreshSlots();
    REQUIRE(backend->nodeFor(key) == cluster.address(replicas.front()));
    CHECK(backend->reconnects() >= reconnected);
  }

  TEST_CASE("dead seeds at start: the operator learns the cluster from the next one") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const auto replicas = cluster.replicasOf(masters[0]);
    REQUIRE_FALSE(replicas.empty());
    cluster.kill(replicas.front());
    const int nobody = dlock::test::freeLoopbackPort();
    auto backend = dlock::connect("redis+cluster://127.0.0.1:" + std::to_string(nobody) + "," +
                                  cluster.address(replicas.front()) + "," + cluster.address(masters[2]));
    for (const std::size_t master : masters) {
      const std::string key = keysOn(owners, master, "seeded-", 1).front();
      CAPTURE(key);
      const auto taken = backend->lock(key, "token", 5000ms);
      CHECK(taken.acquired);
      CHECK(cluster.client(master).ok({"GET", "dlock:{" + key + "}"}).str == "token");
      CHECK(backend->unlock(key, "token").released);
    }
  }

  TEST_CASE("scripts/cluster-start starts six nodes below the ephemeral port range, and cluster-stop stops them") {
    const dlock::test::TempDir dir;
    const std::string scripts = std::string(DLOCK_SOURCE_DIR) + "/scripts";
    const auto [status, uri] = dlock::test::runScript(scripts + "/cluster-start " + dir.path());
    CHECK(status == 0);
    const std::vector<pid_t> pids =
        dlock::test::pidsIn(dir.path(), {"node-0", "node-1", "node-2", "node-3", "node-4", "node-5"});
    REQUIRE(pids.size() == 6);
    REQUIRE(uri.rfind("redis+cluster://127.0.0.1:", 0) == 0);
    // Outgoing connections take their ports from 32768 up: no node (nor its bus, +10000) is there.
    std::ifstream ports(dir.file("cluster.ports"));
    for (int port = 0; ports >> port;) {
      CHECK(port >= 1024);
      CHECK(port + 10000 < 32768);
    }
    {
      auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(10s).build();
      CHECK(lock->tryLock("scripted", 2s));
      CHECK(lock->fencingToken("scripted") > 0);
      lock->unlock("scripted");
    }
    CHECK(std::system((scripts + "/cluster-stop " + dir.path()).c_str()) == 0);
    for (pid_t pid : pids) CHECK_FALSE(dlock::test::processAlive(pid));
  }
}

TEST_SUITE("Cluster") {
  TEST_CASE("one dead master touches only its own leases: a lease on a healthy master stays held and renewed") {
    ClusterServers cluster;
    const auto owners = cluster.slotOwners();
    const auto masters = cluster.masters();
    const std::string healthy = keysOn(owners, masters[0], "healthy-", 1).front();
    const std::string doomed = keysOn(owners, masters[1], "doomed-", 1).front();
    auto options = optionsFor(cluster, {masters[0], masters[2]});
    options.connection.connectTimeout = 300ms;
    options.connection.commandTimeout = 500ms;
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::ClusterOperator>(options)).watchdogLease(3s).build();
    std::atomic<int> healthyLost{0};
    lock->onLockLost([&](std::string_view key, std::uint64_t) {
      if (key == healthy) ++healthyLost;
    });
    REQUIRE(lock->tryLock(healthy));
    REQUIRE(lock->tryLock(doomed));
    const auto renewalsBefore = lock->stats().renewals;
    cluster.kill(masters[1]);
    // Four more renewals of the healthy lease span more than its 3 s lease: had the dead master's
    // failure discarded them, it would have been reported lost by now.
    REQUIRE(dlock::test::eventually([&] { return lock->stats().renewals >= renewalsBefore + 4; }));
    CHECK(lock->isHeld(healthy));
    CHECK(healthyLost == 0);
    RedisClient client = cluster.client(masters[0]);
    CHECK(client.ok({"PTTL", "dlock:{" + healthy + "}"}).integer > 1000);  // freshly renewed
    CHECK_NOTHROW(lock->unlock(healthy));
    (void)lock->unlockQuietly(doomed);
  }
}
