// SPDX-License-Identifier: Apache-2.0
// Redlock over five independent redis-servers that the tests start, kill, restart and pause.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ForkedIncrements.h"
#include "KeysLeftBehind.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "ChildProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using dlock::test::recovers;
using Steady = std::chrono::steady_clock;

namespace {

// Five private servers. A config line of our own keeps RedisProcess from using an outside
// server (DLOCK_TEST_REDIS): a redlock needs independent servers it can kill.
struct RedlockSet {
  explicit RedlockSet(std::size_t count = 5) {
    RedisProcess::Options options;
    options.config = {"appendonly no"};
    for (std::size_t i = 0; i < count; ++i) servers.push_back(std::make_unique<RedisProcess>(options));
  }

  // For tests of exclusion, not of time: a node of a machine loaded by parallel builds and
  // sanitizers may take longer than 500 ms to answer a fresh connection.
  static constexpr const char* kPatient = "node_timeout=5s";

  // redlock://127.0.0.1:P1,...?<query>
  [[nodiscard]] std::string uri(const std::string& query = "node_timeout=500ms") const {
    std::string text = "redlock://";
    for (std::size_t i = 0; i < servers.size(); ++i) {
      if (i > 0) text += ",";
      text += servers[i]->host() + ":" + std::to_string(servers[i]->port());
    }
    return query.empty() ? text : text + "?" + query;
  }

  [[nodiscard]] RedisClient client(std::size_t i) const {
    return RedisClient(servers[i]->host(), servers[i]->port(), 2s);
  }

  // How many running servers (except `skip`) have the Redis key of `key` (the default prefix).
  [[nodiscard]] std::size_t holding(const std::string& key, std::size_t skip = SIZE_MAX) const {
    std::size_t count = 0;
    for (std::size_t i = 0; i < servers.size(); ++i) {
      if (!servers[i]->running() || i == skip) continue;
      count += client(i).ok({"EXISTS", "dlock:{" + key + "}"}).integer == 1 ? 1 : 0;
    }
    return count;
  }

  // Script runs (EVALSHA and EVAL) on server i so far.
  [[nodiscard]] long long scriptCalls(std::size_t i) const {
    auto calls = client(i).commandCalls();
    return calls["evalsha"] + calls["eval"];
  }

  std::vector<std::unique_ptr<RedisProcess>> servers;
};

std::shared_ptr<dlock::ILock> leasedLock(const std::string& uri, std::chrono::milliseconds lease) {
  return dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(lease).build();
}

struct Entry {
  long long seen = 0;
  unsigned long long fence = 0;
};

// Runs `processes` workers doing `each` increments under `uri`, the counter on `counterServer`;
// `during` runs while they work. Checks the count and that the fencing tokens, in the order the
// critical sections ran (the counter value each one saw), strictly increase.
template <class During>
void contend(const std::string& uri, RedisProcess& counterServer, int processes, int each, During during) {
  char pattern[] = "/tmp/dlock-redlock-test-XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::string dir = pattern;
  const std::string counterAt = counterServer.host() + ":" + std::to_string(counterServer.port());
  std::vector<std::unique_ptr<dlock::test::ChildProcess>> workers;
  for (int p = 0; p < processes; ++p) {
    workers.push_back(std::make_unique<dlock::test::ChildProcess>(
        std::vector<std::string>{DLOCK_TEST_WORKER, "increment", uri, "contended", "counter", std::to_string(each),
                                 dir + "/out" + std::to_string(p), counterAt}));
  }
  during();
  for (auto& worker : workers) CHECK(worker->waitFor(120s) == std::optional<int>(0));

  RedisClient counter(counterServer.host(), counterServer.port());
  CHECK(counter.ok({"GET", "counter"}).str == std::to_string(processes * each));
  std::vector<Entry> entries;
  for (int p = 0; p < processes; ++p) {
    std::ifstream in(dir + "/out" + std::to_string(p));
    Entry entry;
    while (in >> entry.seen >> entry.fence) entries.push_back(entry);
  }
  std::filesystem::remove_all(dir);
  REQUIRE(entries.size() == static_cast<std::size_t>(processes * each));
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.seen < b.seen; });
  for (std::size_t i = 0; i < entries.size(); ++i) {
    CHECK(entries[i].seen == static_cast<long long>(i));  // every value seen exactly once
    if (i > 0) CHECK(entries[i].fence > entries[i - 1].fence);
  }
}

}  // namespace

TEST_SUITE("Redlock") {

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt
  TEST_CASE("a redlock inherited across fork(): 4 children x 100 locked increments through it end exact") {
    RedlockSet set;
    RedisProcess counter;
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(set.uri(RedlockSet::kPatient));
    auto lock = dlock::LockBuilder().backend(backend).build();
    dlock::test::exerciseBeforeFork(*lock, "fork-counter-lock");
    dlock::test::checkForkedIncrements(lock, backend, "fork-counter-lock", counter, 2, 4, 100, 60s);
    REQUIRE(lock->tryLock("fork-counter-lock", 5s));  // the parent is unaffected
    lock->unlock("fork-counter-lock");
  }
#endif
  TEST_CASE("four processes contend through a redlock: exact counter, fencing tokens increase in order") {
    RedlockSet set;
    RedisProcess counter;
    contend(set.uri(RedlockSet::kPatient), counter, 4, 25, [] {});
    CHECK(set.holding("contended") == 0);
  }

  TEST_CASE("10,000 distinct keys locked and released leave no key without a TTL on any node, and owner labels show") {
    RedlockSet set;
    std::vector<RedisClient> servers;
    for (std::size_t i = 0; i < set.servers.size(); ++i) servers.push_back(set.client(i));
    dlock::test::checkNoKeyLeftWithoutTtl(dlock::connect(set.uri(RedlockSet::kPatient)), servers);
  }

  TEST_CASE("two of five nodes killed: four processes still lock with an exact counter and growing tokens") {
    RedlockSet set;
    RedisProcess counter;
    set.servers[1]->kill();
    set.servers[3]->kill();
    contend(set.uri(RedlockSet::kPatient), counter, 4, 25, [] {});
    CHECK(set.holding("contended") == 0);
    // A hold that spans a node's death is the watchdog test's subject: a hold taken on exactly
    // a quorum that then loses a node cannot tell at unlock whether a quorum still held it, and
    // unlock says so with ConnectionError (see the README).
  }

  TEST_CASE("three of five nodes killed: tryLock retries within its wait, then raises ConnectionError, leaving no key") {
    RedlockSet set;
    for (std::size_t i : {0, 2, 4}) set.servers[i]->kill();
    std::vector<long long> before;
    for (std::size_t i : {1, 3}) before.push_back(set.scriptCalls(i));
    // connect() checks the nodes and refuses a set without a quorum; lazily made, calls do.
    try {
      (void)dlock::connect(set.uri());
      FAIL("connect to a redlock without a quorum succeeded");
    } catch (const dlock::ConnectionError& error) {
      CHECK_MESSAGE(std::string(error.what()).find("only 2 of 5 nodes answered, fewer than the quorum of 3") !=
                        std::string::npos,
                    error.what());
    }
    const std::string lazy = set.uri("node_timeout=500ms&lazy_connect=true");
    auto lock = leasedLock(lazy, 10s);
    // The nodes may come back within the wait: it is ridden out, and only its end raises.
    CHECK_THROWS_WITH_AS((void)lock->tryLock("k", 1s), doctest::Contains("stayed unreachable"), dlock::ConnectionError);
    CHECK(lock->stats().outageRetries > 0);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(set.holding("k") == 0);
    // The live nodes did take the key (and gave it back): acquire and release ran there.
    std::size_t j = 0;
    for (std::size_t i : {1, 3}) CHECK(set.scriptCalls(i) - before[j++] >= 2);
    // The same through the operator itself.
    auto redlock = dlock::connect(lazy);
    CHECK_THROWS_AS((void)redlock->lock("k", "token", 10s), dlock::ConnectionError);
    CHECK(set.holding("k") == 0);
  }

  TEST_CASE("a paused node does not stall acquisitions beyond the node timeout") {
    RedlockSet set;
    // A command to the paused node would wait 30 s; the node timeout cuts the wait to 200 ms.
    auto lock = leasedLock(set.uri("node_timeout=200ms&command_timeout=30s"), 10s);
    // Connections to every node are open (the first ones may take longer than 200 ms to set up).
    REQUIRE(recovers([&] { return lock->tryLock("warm", 2s); }));
    CHECK(eventually([&] { return set.holding("warm") == 5; }));
    lock->unlock("warm");
    set.servers[2]->pause();
    for (int i = 0; i < 3; ++i) {
      const std::string key = "k" + std::to_string(i);
      const auto start = Steady::now();
      REQUIRE(lock->tryLock(key, 30s));
      const auto took = Steady::now() - start;
      CHECK(took < 5s);  // one node timeout (200 ms) with room for a loaded machine; not the 30 s
      CHECK(eventually([&] { return set.holding(key, 2) == 4; }));  // the other four took it
      lock->unlock(key);
    }
    set.servers[2]->resume();
  }

  TEST_CASE("nodes slower than the validity make the acquisition fail, and it is rolled back") {
    RedlockSet set;
    // A 10 s lease of which the drift allowance leaves 1 s of validity: the keys the late answers
    // leave would live for 10 s, so a key gone soon after was removed by the rollback. The awake
    // nodes get half the validity to answer: 500 ms, which a machine loaded by parallel sanitizer
    // builds needs (with 50 ms, node 3's acquire was once not sent before the attempt gave up).
    dlock::RedlockOptions options;
    options.nodeTimeout = 30s;
    options.clockDriftMargin = 8900ms;  // + 1% of 10 s = 9 s
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (const auto& server : set.servers) members.push_back(dlock::connect(server->uri() + "?command_timeout=30s"));
    dlock::RedlockOperator redlock(members, options);
    // Connections to every node are open; setting them up may take longer than 100 ms.
    REQUIRE(eventually([&] { return redlock.lock("warm", "w", 10s).acquired; }));
    REQUIRE(redlock.unlock("warm", "w").released);
    // Three nodes asleep for 3 s, far longer than the validity and than a busy machine's delays,
    // and far shorter than the node timeout: whatever they answer comes too late. The rollback
    // waits for their answers to its releases, so the call returns when they wake.
    constexpr auto kSleep = 3s;
    std::vector<std::thread> sleepers;
    for (std::size_t i : {0, 1, 2}) {
      sleepers.emplace_back([&, i] {
        RedisClient(set.servers[i]->host(), set.servers[i]->port(), kSleep * 5)
            .ok({"DEBUG", "SLEEP", std::to_string(std::chrono::seconds(kSleep).count())});
      });
    }
    const bool asleep = eventually([&] {
      for (std::size_t i : {0, 1, 2}) {
        if (!dlock::test::inNanosleep(set.servers[i]->pid())) return false;
      }
      return true;
    });
    bool acquired = false;
    if (asleep) {
      const auto before = set.scriptCalls(3);
      const auto start = Steady::now();
      acquired = redlock.lock("k", "t", 10s).acquired;
      const auto took = Steady::now() - start;
      CHECK(took < options.nodeTimeout / 2);  // gave up on time, not at the node timeout
      CHECK(set.scriptCalls(3) - before >= 2);  // node 3 took the key and released it
    }
    for (auto& sleeper : sleepers) sleeper.join();
    REQUIRE_MESSAGE(asleep, "the three servers never went into DEBUG SLEEP");
    CHECK_FALSE(acquired);  // too slow is a failed attempt, not a connection error
    // The late acquires landed after the DEBUG SLEEP; the releases behind them removed them.
    CHECK(eventually([&] { return set.holding("k") == 0; }));
    // With every node answering at once, 1 s is plenty (a busy machine may need a second try).
    CHECK(eventually([&] { return redlock.lock("k", "t2", 10s).acquired; }));
  }

  TEST_CASE("fencing tokens keep increasing when successive acquisitions use different quorums") {
    RedlockSet set;
    std::uint64_t last = 0;
    // Each step is a new client, as successive holders would be; servers restart empty.
    const auto acquire = [&](const char* step) {
      INFO(step);
      auto lock = leasedLock(set.uri(), 10s);
      // A new client's first connections may outlast the node timeout on a busy machine.
      REQUIRE(recovers([&] { return lock->tryLock("fenced", 5s); }));
      const std::uint64_t token = lock->fencingToken("fenced");
      CHECK(token > last);
      last = token;
      lock->unlock("fenced");
    };
    acquire("all five");
    acquire("all five again");
    set.servers[0]->kill();
    set.servers[1]->kill();
    acquire("quorum 2, 3, 4");
    set.servers[0]->restart();
    set.servers[1]->restart();
    set.servers[2]->kill();
    set.servers[3]->kill();
    acquire("quorum 0, 1, 4 (0 and 1 restarted empty)");
    set.servers[2]->restart();
    set.servers[3]->restart();
    set.servers[4]->kill();
    set.servers[0]->kill();
    acquire("quorum 1, 2, 3 (2 and 3 restarted empty)");
    set.servers[4]->restart();
    set.servers[0]->restart();
    acquire("all five (4 and 0 restarted empty)");
  }

  TEST_CASE("a waiter in another client is woken by the release, also with a node down") {
    RedlockSet set;
    for (bool nodeDown : {false, true}) {
      INFO("node down: " << nodeDown);
      if (nodeDown) set.servers[4]->kill();
      auto holder = leasedLock(set.uri(), 60s);
      // Rechecks after a minute and the lease is a minute: only the release message can wake it sooner.
      auto waiter = dlock::LockBuilder()
                        .backend(dlock::connect(set.uri()))
                        .leaseTime(60s)
                        .waitStrategy(std::make_shared<dlock::NotifyWait>(60s))
                        .build();
      REQUIRE(holder->tryLock("k"));
      std::atomic<bool> acquired{false};
      Steady::time_point acquiredAt;
      std::thread thread([&] {
        acquired = waiter->tryLock("k", 20s);
        acquiredAt = Steady::now();
        if (acquired) waiter->unlock("k");
      });
      // The waiter attempted, subscribed, attempted again: asleep, registered on a quorum of the
      // nodes that are up. Which quorum is the first to answer the watch (a node whose watch came
      // after the quorum's is not watched, so not registered): node 4 may be one of them.
      const auto registeredNodes = [&] {
        int registered = 0;
        for (std::size_t i = 0; i < (nodeDown ? 4U : 5U); ++i) {
          auto node = set.client(i);
          if (dlock::test::waiterRegistered(node, "k")) ++registered;
        }
        return registered;
      };
      CHECK(eventually([&] { return waiter->stats().attempts >= 2 && registeredNodes() >= 3; }));
      const auto releasedAt = Steady::now();
      holder->unlock("k");
      thread.join();
      REQUIRE(acquired);
      CHECK(acquiredAt - releasedAt < 5s);
    }
  }

  TEST_CASE("the watchdog keeps a redlock lease alive, also after a node dies") {
    RedlockSet set;
    auto lock = dlock::LockBuilder().backend(dlock::connect(set.uri())).watchdogLease(1500ms).build();
    REQUIRE(lock->tryLock("k"));
    // Four renewals (every 500 ms): more than a lease has passed, and only renewals kept it.
    const auto renewedTimes = [&](std::uint64_t count) {
      return eventually([&] { return lock->stats().renewals >= count; });
    };
    CHECK(renewedTimes(4));
    CHECK(lock->isHeld("k"));
    set.servers[0]->kill();
    CHECK(renewedTimes(8));
    CHECK(lock->isHeld("k"));
    for (std::size_t i = 1; i < 5; ++i) {
      const auto ttl = set.client(i).ok({"PTTL", "dlock:{k}"}).integer;
      CHECK(ttl > 0);
      CHECK(ttl <= 1500);
    }
    CHECK(lock->stats().renewals >= 6);
    CHECK(lock->stats().lostLeases == 0);
    lock->unlock("k");  // no LockLostError
    CHECK(set.holding("k") == 0);
  }

  TEST_CASE("scripts/redlock-start starts five servers and prints their URI, and redlock-stop stops them") {
    const dlock::test::TempDir dir;
    const std::string scripts = std::string(DLOCK_SOURCE_DIR) + "/scripts";
    const auto [status, uri] = dlock::test::runScript(scripts + "/redlock-start " + dir.path());
    CHECK(status == 0);
    const std::vector<pid_t> pids = dlock::test::pidsIn(dir.path(), {"node1", "node2", "node3", "node4", "node5"});
    REQUIRE(pids.size() == 5);
    REQUIRE(uri.rfind("redlock://127.0.0.1:", 0) == 0);
    {
      auto redlock = dlock::connect(uri);
      CHECK(dynamic_cast<dlock::RedlockOperator&>(*redlock).nodes() == 5);
      auto lock = dlock::LockBuilder().backend(redlock).leaseTime(10s).build();
      CHECK(lock->tryLock("scripted", 2s));
      CHECK(lock->fencingToken("scripted") > 0);
      lock->unlock("scripted");
    }
    CHECK(std::system((scripts + "/redlock-stop " + dir.path()).c_str()) == 0);
    for (pid_t pid : pids) CHECK_FALSE(dlock::test::processAlive(pid));
  }
}
