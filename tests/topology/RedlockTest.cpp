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
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(set.uri());
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
    contend(set.uri(), counter, 4, 25, [] {});
    CHECK(set.holding("contended") == 0);
  }

  TEST_CASE("two of five nodes killed: four processes still lock with an exact counter and growing tokens") {
    RedlockSet set;
    RedisProcess counter;
    set.servers[1]->kill();
    set.servers[3]->kill();
    contend(set.uri(), counter, 4, 25, [] {});
    CHECK(set.holding("contended") == 0);
    // A hold that spans a node's death is the watchdog test's subject: a hold taken on exactly
    // a quorum that then loses a node cannot tell at unlock whether a quorum still held it, and
    // unlock says so with ConnectionError (see the README).
  }

  TEST_CASE("three of five nodes killed: tryLock raises ConnectionError in time and leaves no key behind") {
    RedlockSet set;
    for (std::size_t i : {0, 2, 4}) set.servers[i]->kill();
    std::vector<long long> before;
    for (std::size_t i : {1, 3}) before.push_back(set.scriptCalls(i));
    auto lock = leasedLock(set.uri(), 10s);
    const auto start = Steady::now();
    CHECK_THROWS_AS((void)lock->tryLock("k", 3s), dlock::ConnectionError);
    CHECK(Steady::now() - start < 3s);
    CHECK_FALSE(lock->isHeld("k"));
    CHECK(set.holding("k") == 0);
    // The live nodes did take the key (and gave it back): acquire and release ran there.
    std::size_t j = 0;
    for (std::size_t i : {1, 3}) CHECK(set.scriptCalls(i) - before[j++] >= 2);
    // The same through the operator itself.
    auto redlock = dlock::connect(set.uri());
    CHECK_THROWS_AS((void)redlock->lock("k", "token", 10s), dlock::ConnectionError);
    CHECK(set.holding("k") == 0);
  }

  TEST_CASE("a paused node does not stall acquisitions beyond the node timeout") {
    RedlockSet set;
    auto lock = leasedLock(set.uri("node_timeout=200ms"), 10s);
    REQUIRE(lock->tryLock("warm", 2s));  // connections to every node are open
    lock->unlock("warm");
    set.servers[2]->pause();
    for (int i = 0; i < 3; ++i) {
      const std::string key = "k" + std::to_string(i);
      const auto start = Steady::now();
      REQUIRE(lock->tryLock(key, 5s));
      const auto took = Steady::now() - start;
      CHECK(took < 1s);  // one node timeout (200 ms), with room for a loaded machine
      CHECK(set.holding(key, 2) == 4);  // the paused node is not asked
      lock->unlock(key);
    }
    set.servers[2]->resume();
  }

  TEST_CASE("nodes slower than the validity make the acquisition fail, and it is rolled back") {
    RedlockSet set;
    // A 10 s lease of which the drift allowance leaves 100 ms of validity: the keys the late
    // answers leave would live for 10 s, so a key gone soon after was removed by the rollback.
    dlock::RedlockOptions options;
    options.nodeTimeout = 2s;
    options.clockDriftMargin = 9800ms;  // + 1% of 10 s = 9.9 s
    std::vector<std::shared_ptr<dlock::IOperator>> members;
    for (const auto& server : set.servers) members.push_back(dlock::connect(server->uri() + "?command_timeout=2s"));
    dlock::RedlockOperator redlock(members, options);
    REQUIRE(redlock.lock("warm", "w", 10s).acquired);  // connections to every node are open
    REQUIRE(redlock.unlock("warm", "w").released);
    // Three nodes busy for 400 ms: whatever they answer comes too late.
    std::vector<std::thread> sleepers;
    for (std::size_t i : {0, 1, 2}) {
      sleepers.emplace_back([&set, i] { set.client(i).ok({"DEBUG", "SLEEP", "0.4"}); });
    }
    std::this_thread::sleep_for(50ms);  // the DEBUG SLEEPs have started
    const auto before = set.scriptCalls(3);
    const auto start = Steady::now();
    const auto result = redlock.lock("k", "t", 10s);
    const auto took = Steady::now() - start;
    for (auto& sleeper : sleepers) sleeper.join();
    CHECK_FALSE(result.acquired);  // too slow is a failed attempt, not a connection error
    CHECK(took < 2s);              // gave up on time, not at the node timeout
    CHECK(set.scriptCalls(3) - before >= 2);  // node 3 took the key and released it
    // The late acquires landed after the DEBUG SLEEP; the releases behind them removed them.
    const auto deadline = Steady::now() + 3s;
    while (set.holding("k") > 0 && Steady::now() < deadline) std::this_thread::sleep_for(10ms);
    CHECK(set.holding("k") == 0);
    CHECK(redlock.lock("k", "t2", 10s).acquired);  // with every node answering at once, 100 ms is plenty
  }

  TEST_CASE("fencing tokens keep increasing when successive acquisitions use different quorums") {
    RedlockSet set;
    std::uint64_t last = 0;
    // Each step is a new client, as successive holders would be; servers restart empty.
    const auto acquire = [&](const char* step) {
      INFO(step);
      auto lock = leasedLock(set.uri(), 10s);
      REQUIRE(lock->tryLock("fenced", 5s));
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
      auto holder = leasedLock(set.uri(), 30s);
      // Rechecks every 10 s and the lease is 30 s: only the release message can wake it sooner.
      auto waiter = dlock::LockBuilder()
                        .backend(dlock::connect(set.uri()))
                        .leaseTime(30s)
                        .waitStrategy(std::make_shared<dlock::NotifyWait>(10s))
                        .build();
      REQUIRE(holder->tryLock("k"));
      std::atomic<bool> acquired{false};
      Steady::time_point acquiredAt;
      std::thread thread([&] {
        acquired = waiter->tryLock("k", 20s);
        acquiredAt = Steady::now();
        if (acquired) waiter->unlock("k");
      });
      std::this_thread::sleep_for(300ms);  // the waiter is subscribed and asleep
      const auto releasedAt = Steady::now();
      holder->unlock("k");
      thread.join();
      REQUIRE(acquired);
      CHECK(acquiredAt - releasedAt < 2s);
    }
  }

  TEST_CASE("the watchdog keeps a redlock lease alive, also after a node dies") {
    RedlockSet set;
    auto lock = dlock::LockBuilder().backend(dlock::connect(set.uri())).watchdogLease(1500ms).build();
    REQUIRE(lock->tryLock("k"));
    std::this_thread::sleep_for(2s);  // more than a lease: renewed every 500 ms
    CHECK(lock->isHeld("k"));
    set.servers[0]->kill();
    std::this_thread::sleep_for(2s);
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
      CHECK(lock->fencingToken("scripted") == 1);
      lock->unlock("scripted");
    }
    CHECK(std::system((scripts + "/redlock-stop " + dir.path()).c_str()) == 0);
    for (pid_t pid : pids) CHECK_FALSE(dlock::test::processAlive(pid));
  }
}
