// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ChildProcess.h"
#include "ForkedIncrements.h"
#include "KeysLeftBehind.h"
#include "RedisClient.h"
#include "SentinelServers.h"
#include "TestHelpers.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/sentinel/SentinelOperator.h"

using namespace std::chrono_literals;
using dlock::test::SentinelServers;
using Steady = std::chrono::steady_clock;

namespace {

// Made lazily, as these tests check what the calls do (connect()'s own check has its tests).
std::shared_ptr<dlock::SentinelOperator> sentinelOperator(const std::string& uri) {
  auto backend = std::dynamic_pointer_cast<dlock::SentinelOperator>(dlock::connect(uri, dlock::ConnectOptions{true}));
  REQUIRE(backend.get() != nullptr);
  return backend;
}

std::string portText(int port) { return "127.0.0.1:" + std::to_string(port); }

// Polls `condition` every 20 ms; false when `budget` passed first.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (!condition()) {
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

long long nanos(Steady::time_point at) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count();
}

double secondsBetween(long long from, long long to) { return static_cast<double>(to - from) / 1e9; }

// A line of a worker's log (see TestWorker.cpp, mode sentinel-increment).
struct Event {
  std::string kind;  // reached ok unknown counter-error ambiguous error
  long long at = 0;  // steady-clock nanoseconds
  std::string address;  // reached ok unknown counter-error
  std::string id;       // ok unknown
  long long value = 0;  // ok
  unsigned long long fence = 0;  // ok
  std::string phase, type, message;  // error
};

std::vector<Event> readEvents(const std::string& path) {
  std::vector<Event> events;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Event event;
    fields >> event.kind >> event.at;
    if (event.kind == "reached" || event.kind == "counter-error") {
      fields >> event.address;
    } else if (event.kind == "ok") {
      fields >> event.address >> event.id >> event.value >> event.fence;
    } else if (event.kind == "unknown") {
      fields >> event.address >> event.id;
    } else if (event.kind == "error") {
      fields >> event.phase >> event.type;
    }
    std::getline(fields, event.message);
    events.push_back(event);
  }
  return events;
}

// Four processes incrementing one counter under one lock through sentinel discovery, as
// TestWorker's sentinel-increment mode does; stopped through a stop file.
class Contention {
 public:
  static constexpr int kWorkers = 4;

  Contention(SentinelServers& set, std::chrono::milliseconds lease) : dir_(set.directory() + "/workers") {
    std::filesystem::create_directories(dir_);
    for (int i = 0; i < kWorkers; ++i) {
      logs_.push_back(dir_ + "/worker-" + std::to_string(i) + ".log");
      dlock::test::ChildProcess::Options worker;
      worker.argv = {DLOCK_TEST_WORKER, "sentinel-increment", set.uri(), "k", "counter", "done",
                     "w" + std::to_string(i), std::to_string(lease.count()), dir_ + "/stop", logs_.back()};
      worker.outputFile = dir_ + "/worker-" + std::to_string(i) + ".stderr";
      workers_.push_back(std::make_unique<dlock::test::ChildProcess>(worker));
    }
  }

  // Events of every worker, by worker.
  [[nodiscard]] std::vector<std::vector<Event>> events() const {
    std::vector<std::vector<Event>> all;
    for (const auto& log : logs_) all.push_back(readEvents(log));
    return all;
  }

  // True when every worker logged at least `count` increments acknowledged by `address`.
  [[nodiscard]] bool everyWorkerIncremented(int count, const std::string& address = "") const {
    for (const auto& events : this->events()) {
      const auto n = std::count_if(events.begin(), events.end(), [&](const Event& event) {
        return event.kind == "ok" && (address.empty() || event.address == address);
      });
      if (n < count) return false;
    }
    return true;
  }

  // Asks every worker to stop and waits for them; REQUIREs a clean exit.
  void stop() {
    std::ofstream(dir_ + "/stop") << "stop\n";
    for (auto& worker : workers_) REQUIRE(worker->waitFor(20s) == std::optional<int>(0));
  }

 private:
  std::string dir_;
  std::vector<std::string> logs_;
  std::vector<std::unique_ptr<dlock::test::ChildProcess>> workers_;
};

// What a failover run must show, whatever caused the failover (`eventAt`: the kill or the
// SENTINEL FAILOVER; `failoverAt`: when a sentinel first named the new master):
//
// - every worker reached the new master (an attempt answered there) by failoverAt + kSettle, and
//   went on incrementing there;
// - errors only inside the window [eventAt, failoverAt + kSettle], the workers' own counter writes
//   included; from dlock, ConnectionError when acquiring, ConnectionError or LockLostError when
//   unlocking (a lease taken on the old master that the new one never had is reported lost,
//   truthfully); nothing else, ever;
// - the counter is exact on the history that survived. The counter and the lock live on the
//   master, replicated asynchronously, so an increment the old master acknowledged can be lost in
//   a failover: its unreplicated tail (kill), or what it took after the replica's promotion and
//   before the clients moved (graceful). Each increment adds its id to the set DONE in the same
//   MULTI as the counter write, so the final master tells exactly which increments landed:
//     counter == |DONE|         no two holders overlapped on the surviving history (a lost
//                               update would leave the counter below |DONE|)
//     DONE ⊆ ok ∪ unknown       nothing counted that no worker wrote
//     ok on the new master ⊆ DONE,  and every acknowledged increment lost was acknowledged by
//                               the old master at most kReplicationLag before the event
//   hence counter == ok − lost + landed-unknown, which is checked and printed;
// - fencing tokens of the surviving increments, in counter order, strictly increase.
//
// kSettle: what a client needs to move once a sentinel names the new master (its 1 s command
// timeout, a reconnect back-off of at most 1 s), with room for a busy machine.
// kReplicationLag: a generous bound on loopback replication lag, on a busy machine too.
constexpr auto kSettle = 10s;
constexpr auto kReplicationLag = 1s;

void checkFailoverRun(const std::vector<std::vector<Event>>& byWorker, long long eventAt, long long failoverAt,
                      const std::string& oldMaster, const std::string& newMaster, dlock::test::RedisClient& final) {
  const long long windowEnd = failoverAt + std::chrono::nanoseconds(kSettle).count();
  std::map<std::string, const Event*> ok;
  std::set<std::string> unknown;
  std::size_t errors = 0;
  long long lastReach = eventAt;
  for (std::size_t w = 0; w < byWorker.size(); ++w) {
    CAPTURE(w);
    std::optional<long long> reachedAt;
    std::size_t okOnNew = 0;
    for (const auto& event : byWorker[w]) {
      if (event.kind == "reached" && event.address == newMaster && !reachedAt) reachedAt = event.at;
      if (event.kind == "ok") {
        ok[event.id] = &event;
        if (event.address == newMaster) ++okOnNew;
      }
      if (event.kind == "unknown") unknown.insert(event.id);
      if (event.kind == "error" || event.kind == "counter-error") {
        ++errors;
        CAPTURE(event.kind);
        CAPTURE(event.phase);
        CAPTURE(event.type);
        CAPTURE(event.message);
        CHECK(event.at >= eventAt);
        CHECK(event.at <= windowEnd);
        if (event.phase == "acquire") CHECK(event.type == "ConnectionError");
        if (event.phase == "unlock") CHECK((event.type == "ConnectionError" || event.type == "LockLostError"));
      }
    }
    REQUIRE(reachedAt.has_value());
    CHECK(*reachedAt <= windowEnd);
    lastReach = std::max(lastReach, *reachedAt);
    CHECK(okOnNew > 0);
  }

  const long long counter = std::stoll(final.ok({"GET", "counter"}).str);
  std::set<std::string> done;
  for (const auto& member : final.ok({"SMEMBERS", "done"}).elements) done.insert(member.str);
  CHECK(counter == static_cast<long long>(done.size()));

  std::size_t lost = 0;
  std::size_t landedUnknown = 0;
  for (const auto& id : done) {
    CAPTURE(id);
    CHECK((ok.count(id) == 1 || unknown.count(id) == 1));
    if (unknown.count(id) == 1) ++landedUnknown;
  }
  for (const auto& [id, event] : ok) {
    if (done.count(id) == 1) continue;
    ++lost;
    CAPTURE(id);
    CHECK(event->address == oldMaster);
    CHECK(event->at >= eventAt - std::chrono::nanoseconds(kReplicationLag).count());
  }
  CHECK(counter == static_cast<long long>(ok.size() - lost + landedUnknown));

  std::map<long long, unsigned long long> fenceByValue;
  for (const auto& [id, event] : ok) {
    if (done.count(id) == 0) continue;
    CAPTURE(id);
    CHECK(fenceByValue.emplace(event->value, event->fence).second);  // each value written once
    CHECK(event->value >= 1);
    CHECK(event->value <= counter);
  }
  unsigned long long previous = 0;
  for (const auto& [value, fence] : fenceByValue) {
    CAPTURE(value);
    CHECK(fence > previous);
    previous = fence;
  }
  MESSAGE("failover: a sentinel named the new master " << secondsBetween(eventAt, failoverAt)
          << " s after the event; the last worker reached it " << secondsBetween(eventAt, lastReach)
          << " s after the event; counter " << counter << " = " << ok.size()
          << " acknowledged - " << lost << " lost with the old master + " << landedUnknown << " of " << unknown.size()
          << " unknown that landed; " << errors << " errors, all in the window");
}

// Four processes contend on a fresh set; `trigger` makes the master fail over; then every worker
// must go on incrementing on the new master, and the run must pass checkFailoverRun.
void failoverUnderContention(const std::function<void(SentinelServers&)>& trigger) {
  SentinelServers set;
  const int oldMaster = set.dataPort(0);
  Contention contention(set, 2000ms);
  REQUIRE(eventually([&] { return contention.everyWorkerIncremented(10); }, 20s));

  const auto eventAt = Steady::now();
  trigger(set);
  const int newMaster = set.waitForMasterOtherThan(oldMaster, 30s);
  const auto failoverAt = Steady::now();
  REQUIRE(eventually([&] { return contention.everyWorkerIncremented(5, portText(newMaster)); }, 20s));
  contention.stop();

  auto final = set.dataClient(set.nodeOfPort(newMaster));
  checkFailoverRun(contention.events(), nanos(eventAt), nanos(failoverAt), portText(oldMaster), portText(newMaster),
                   final);
}

}  // namespace

TEST_SUITE("SentinelOperator") {

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt
  TEST_CASE("a sentinel lock inherited across fork(): 4 children x 100 locked increments through it end exact") {
    SentinelServers set;
    dlock::test::RedisProcess counter;
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(set.uri());
    auto lock = dlock::LockBuilder().backend(backend).build();
    dlock::test::exerciseBeforeFork(*lock, "fork-counter-lock");
    dlock::test::checkForkedIncrements(lock, backend, "fork-counter-lock", counter, 2, 4, 100, 60s);
    REQUIRE(lock->tryLock("fork-counter-lock", 5s));  // the parent is unaffected
    lock->unlock("fork-counter-lock");
  }
#endif
  TEST_CASE("finds the master through the sentinels: lock, extend, inspect and unlock go there") {
    SentinelServers set;
    auto backend = sentinelOperator(set.uri());
    CHECK(backend->masterAddress().empty());  // nothing contacted before the first call

    const auto taken = backend->lock("k", "token-1", 5000ms);
    REQUIRE(taken.acquired);
    CHECK(taken.fencingToken > 0);
    CHECK(backend->masterAddress() == portText(set.dataPort(0)));
    CHECK(backend->describe() == set.uri() + " (master " + portText(set.dataPort(0)) + ")");
    auto master = set.dataClient(0);
    CHECK(master.ok({"GET", "dlock:{k}"}).str == "token-1");

    const auto busy = backend->lock("k", "token-2", 5000ms);
    CHECK_FALSE(busy.acquired);
    CHECK(busy.holderTtl > 0ms);
    CHECK(backend->extend("k", "token-1", 60000ms));
    CHECK_FALSE(backend->extend("k", "token-2", 60000ms));
    CHECK(backend->inspect("k").held);
    CHECK(backend->inspect("k").fencingToken == taken.fencingToken);
    CHECK(backend->raiseFence("k", taken.fencingToken + 10) == taken.fencingToken + 10);
    CHECK_FALSE(backend->unlock("k", "token-2").released);
    CHECK(backend->unlock("k", "token-1").released);
    CHECK(master.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(backend->lock("k", "token-3", 5000ms).fencingToken > taken.fencingToken + 10);
    CHECK(backend->masterSwitches() == 0);
  }

  TEST_CASE("10,000 distinct keys locked and released leave no key without a TTL on the master, and owner labels show") {
    SentinelServers set;
    std::vector<dlock::test::RedisClient> servers;
    servers.push_back(set.dataClient(0));
    dlock::test::checkNoKeyLeftWithoutTtl(sentinelOperator(set.uri()), servers);
  }

  TEST_CASE("the master killed with SIGKILL under contention: clients move to the promoted replica") {
    failoverUnderContention([](SentinelServers& set) { set.killData(0); });
  }

  TEST_CASE("SENTINEL FAILOVER under contention: clients follow the promotion") {
    failoverUnderContention([](SentinelServers& set) { set.failover(1); });
  }

  TEST_CASE("a waiter is woken by the release message, before and after a failover") {
    SentinelServers set;
    // The lease and the waiter's recheck last a minute: only the release message wakes it sooner.
    auto holder = dlock::LockBuilder().backend(dlock::connect(set.uri())).leaseTime(60s).build();
    auto waiter = dlock::LockBuilder()
                      .backend(dlock::connect(set.uri()))
                      .leaseTime(60s)
                      .waitStrategy(std::make_shared<dlock::NotifyWait>(60s))
                      .build();
    // The wake-up delay of a waiter blocked on `key` while the holder releases it, once the
    // waiter sleeps on the release channel (it attempted, queued, subscribed, attempted again).
    const auto handOff = [&](const std::string& key) {
      REQUIRE(holder->tryLock(key));
      auto master = set.dataClient(set.nodeOfPort(set.masterPort()));
      const auto attemptsBefore = waiter->stats().attempts;
      std::atomic<bool> acquired{false};
      Steady::time_point acquiredAt;
      std::thread blocked([&] {
        acquired = waiter->tryLock(key, 20s);
        acquiredAt = Steady::now();
        if (acquired) waiter->unlock(key);
      });
      CHECK(dlock::test::eventually([&] {
        return waiter->stats().attempts >= attemptsBefore + 1 && dlock::test::releaseSubscribers(master, key) >= 1 &&
               dlock::test::waiterRegistered(master, key);
      }));
      const auto releasedAt = Steady::now();
      holder->unlock(key);
      blocked.join();
      REQUIRE(acquired);
      return acquiredAt - releasedAt;
    };
    // A round trip, stretched by a busy machine; far below the minute a lost message would cost.
    CHECK(handOff("before") < 5s);

    const int oldMaster = set.masterPort();
    set.failover();
    const int newMaster = set.waitForMasterOtherThan(oldMaster, 30s);
    set.waitForAllSentinelsToName(newMaster, 10s);
    // The subscriber moved to the new master with the pool: the same hand-off works there.
    CHECK(handOff("after") < 5s);
    CHECK(set.dataClient(set.nodeOfPort(newMaster)).ok({"EXISTS", "dlock:{after}:fence"}).integer == 1);  // taken there
  }

  TEST_CASE("the watchdog keeps a lease alive, and renews it on the new master after a failover") {
    SentinelServers set;
    auto backend = sentinelOperator(set.uri());
    auto lock = dlock::LockBuilder().backend(backend).watchdogLease(900ms).build();
    lock->lock("w");
    // Four renewals, one every 300 ms: more than the lease has passed, and only renewals kept it.
    const auto renewedTimes = [&](std::uint64_t count) {
      return dlock::test::eventually([&] { return lock->stats().renewals >= count; });
    };
    CHECK(renewedTimes(4));
    CHECK(lock->isHeld("w"));
    CHECK(set.dataClient(0).ok({"PTTL", "dlock:{w}"}).integer > 0);

    const int oldMaster = set.masterPort();
    set.failover();
    const int newMaster = set.waitForMasterOtherThan(oldMaster, 30s);
    REQUIRE(eventually([&] { return backend->masterAddress() == portText(newMaster); }, dlock::test::kEventBudget));
    CHECK(renewedTimes(lock->stats().renewals + 4));  // on the promoted replica, for more than a lease
    CHECK(lock->isHeld("w"));
    auto promoted = set.dataClient(set.nodeOfPort(newMaster));
    CHECK(promoted.ok({"PTTL", "dlock:{w}"}).integer > 0);
    CHECK(lock->stats().renewals >= 6);
    CHECK(lock->stats().lostLeases == 0);
    lock->unlock("w");
    CHECK(promoted.ok({"EXISTS", "dlock:{w}"}).integer == 0);
  }

  TEST_CASE("replication-acked acquire: a lock on every replica survives the master's death") {
    SentinelServers set;
    auto acked = sentinelOperator(set.uri("wait_replicas=2&wait_timeout=300ms"));
    auto plain = sentinelOperator(set.uri());
    const auto before = acked->lock("acked", "token-acked", 60000ms);  // both replicas acknowledged it
    REQUIRE(before.acquired);

    // Replication stops (replicas frozen, their links cut, so nothing more reaches even their
    // sockets): a plain acquire still counts, an acked one is released and refused.
    set.pauseData(1);
    set.pauseData(2);
    CHECK(set.dataClient(0).ok({"CLIENT", "KILL", "TYPE", "replica"}).integer == 2);
    REQUIRE(plain->lock("plain", "token-plain", 60000ms).acquired);
    const auto start = Steady::now();
    CHECK_THROWS_WITH_AS(acked->lock("refused", "token-refused", 60000ms),
                         doctest::Contains("only 0 of 2 replicas acknowledged the lock within 300 ms; released it"),
                         dlock::ConnectionError);
    CHECK(Steady::now() - start < 300ms + 5s);  // the WAIT timeout, with room for a busy machine
    CHECK(set.dataClient(0).ok({"EXISTS", "dlock:{refused}"}).integer == 0);

    // The master dies before the replicas get the plain lock; the acked one is on both.
    set.killData(0);
    set.resumeData(1);
    set.resumeData(2);
    const int newMaster = set.waitForMasterOtherThan(set.dataPort(0), 30s);
    auto promoted = set.dataClient(set.nodeOfPort(newMaster));
    CHECK(promoted.ok({"GET", "dlock:{acked}"}).str == "token-acked");
    CHECK(promoted.ok({"GET", "dlock:{acked}:fence"}).str == std::to_string(before.fencingToken));
    CHECK(promoted.ok({"EXISTS", "dlock:{plain}"}).integer == 0);  // the window WAIT closes
    CHECK(promoted.ok({"EXISTS", "dlock:{refused}"}).integer == 0);
    REQUIRE(eventually([&] { return acked->masterAddress() == portText(newMaster); }, dlock::test::kEventBudget));
    CHECK(acked->unlock("acked", "token-acked").released);
    // One replica is left: asking for two now refuses every acquire, as documented.
    CHECK_THROWS_AS(acked->lock("later", "token-later", 60000ms), dlock::ConnectionError);
  }

  TEST_CASE("replication-acked renewals: renewals no replica acknowledges do not keep a lease, which ends at its deadline") {
    // Split brain seen from the holder: its master still answers, its replicas are gone. The key
    // stays renewed on that master, but a promoted replica would let it expire: the lease is lost.
    SentinelServers set;
    auto lock = dlock::LockBuilder()
                    .backend(sentinelOperator(set.uri("wait_replicas=1&wait_timeout=100ms")))
                    .watchdogLease(1500ms)
                    .build();
    std::atomic<int> lost{0};
    lock->onLockLost([&](std::string_view, std::uint64_t) { ++lost; });
    REQUIRE(lock->tryLock("split", 0ms));
    set.pauseData(1);
    set.pauseData(2);
    CHECK(set.dataClient(0).ok({"CLIENT", "KILL", "TYPE", "replica"}).integer == 2);
    REQUIRE(eventually([&] { return lost.load() == 1; }, dlock::test::kEventBudget));
    CHECK_FALSE(lock->isHeld("split"));
    CHECK(lock->stats().lostLeases == 1);
    CHECK_THROWS_AS(lock->unlock("split"), dlock::LockLostError);
    set.resumeData(1);
    set.resumeData(2);
  }

  TEST_CASE("replication-acked acquire with WAIT refused by the ACL: BackendError, and the key is released") {
    SentinelServers set;
    set.dataClient(0).ok({"ACL", "SETUSER", "nowait", "on", ">pw", "~*", "&*", "+@all", "-wait"});
    const std::string scheme = "redis+sentinel://";
    const std::string uri = scheme + "nowait:pw@" + set.uri("wait_replicas=1").substr(scheme.size());
    auto backend = sentinelOperator(uri);
    CHECK_THROWS_WITH_AS((void)backend->lock("k", "token-1", 60000ms), doctest::Contains("released it"),
                         dlock::BackendError);
    CHECK(set.dataClient(0).ok({"EXISTS", "dlock:{k}"}).integer == 0);
    // Through a lock (the watchdog's lease): nothing held here or on the master.
    auto lock = dlock::LockBuilder().backend(backend).build();
    CHECK_THROWS_WITH_AS((void)lock->tryLock("other"), doctest::Contains("NOPERM"), dlock::BackendError);
    CHECK(lock->holdCount("other") == 0);
    CHECK(set.dataClient(0).ok({"EXISTS", "dlock:{other}"}).integer == 0);
  }

  TEST_CASE("replication-acked cycles: an uncontended lock, read, write or permit cycle costs one WAIT more than without") {
    SentinelServers set;
    auto master = set.dataClient(0);
    constexpr int kCycles = 100;
    // A token per hold, as a lock makes one (a token's release record would cost its next acquire
    // a look-up, and a released permit token is refused).
    int tokens = 10'000'000;
    // The master's calls per cycle (scripts' inner calls included), but the sentinels' and the
    // replicas' own traffic and this client's; and the WAITs among them.
    const auto perCycle = [&](const std::function<void(const std::string&)>& cycle) {
      const auto next = [&] { return std::string(24, 'a') + std::to_string(tokens++); };
      cycle(next());  // connected, scripts cached
      (void)master.ok({"CONFIG", "RESETSTAT"});
      for (int i = 0; i < kCycles; ++i) cycle(next());
      long long calls = 0;
      long long waits = 0;
      for (const auto& [command, count] : master.commandCalls()) {
        if (command == "wait") waits = count;
        const bool theirs = command == "ping" || command == "replconf" || command.rfind("info", 0) == 0 ||
                            command.rfind("config", 0) == 0;
        if (!theirs) calls += count;
      }
      CHECK(waits % kCycles == 0);
      return std::make_pair(static_cast<double>(calls) / kCycles, waits / kCycles);
    };
    for (const std::string query : {"", "wait_replicas=2&wait_timeout=5s"}) {
      CAPTURE(query);
      auto backend = dlock::connect(set.uri(query));
      auto& readWrite = dynamic_cast<dlock::IReadWriteOperator&>(*backend);
      auto& semaphore = dynamic_cast<dlock::ISemaphoreOperator&>(*backend);
      const auto lock = perCycle([&](const std::string& token) {
        REQUIRE(backend->lock("cycle", token, 10s).acquired);
        REQUIRE(backend->unlock("cycle", token).released);
      });
      const auto write = perCycle([&](const std::string& token) {
        REQUIRE(readWrite.acquireWrite("cycle", token, 10s, 0ms).acquired);
        REQUIRE(readWrite.releaseWrite("cycle", token).released);
      });
      const auto read = perCycle([&](const std::string& token) {
        REQUIRE(readWrite.acquireRead("cycle", token, 10s, 0ms).acquired);
        REQUIRE(readWrite.releaseRead("cycle", token).released);
      });
      const auto permits = perCycle([&](const std::string& token) {
        REQUIRE(semaphore.acquirePermits("cycle", token, 1, 4, 10s, 0ms).acquired);
        REQUIRE(semaphore.releasePermits("cycle", token).released);
      });
      MESSAGE("server calls per uncontended cycle (", query.empty() ? "plain" : query, "): lock ", lock.first,
              ", write ", write.first, ", read ", read.first, ", permits ", permits.first);
      const long long waits = query.empty() ? 0 : 1;
      CHECK(lock.second == waits);
      CHECK(write.second == waits);
      CHECK(read.second == waits);
      CHECK(permits.second == waits);
      CHECK(write.first <= lock.first);
      CHECK(read.first <= lock.first);
      CHECK(permits.first <= lock.first);
    }
  }

  TEST_CASE("one sentinel of three dead: discovery and failover still work") {
    SentinelServers set;
    set.killSentinel(0);  // the first one every client asks
    auto backend = sentinelOperator(set.uri());
    REQUIRE(backend->lock("k", "token-1", 10000ms).acquired);
    CHECK(backend->masterAddress() == portText(set.dataPort(0)));

    set.failover(1);
    const int newMaster = set.waitForMasterOtherThan(set.dataPort(0), 30s);
    REQUIRE(eventually([&] { return backend->masterAddress() == portText(newMaster); }, dlock::test::kEventBudget));
    CHECK(backend->unlock("k", "token-1").released);  // the lock was replicated before the promotion
    REQUIRE(backend->lock("k", "token-2", 10000ms).acquired);
    CHECK(set.dataClient(set.nodeOfPort(newMaster)).ok({"GET", "dlock:{k}"}).str == "token-2");
  }

  TEST_CASE("every sentinel unreachable: ConnectionError within the sentinel timeouts") {
    SentinelServers set;
    const std::string timeouts = "connect_timeout=300ms&command_timeout=300ms";
    auto known = sentinelOperator(set.uri(timeouts));
    REQUIRE(known->lock("k", "token-1", 10000ms).acquired);

    // Paused sentinels accept connections but never answer: each costs its command timeout.
    for (std::size_t s = 0; s < SentinelServers::kSentinels; ++s) set.pauseSentinel(s);
    auto fresh = sentinelOperator(set.uri(timeouts));
    auto start = Steady::now();
    CHECK_THROWS_WITH_AS(fresh->lock("k", "token-2", 10000ms), doctest::Contains("no master 'mymaster' confirmed"),
                         dlock::ConnectionError);
    CHECK(Steady::now() - start < 3 * 600ms + 1s);
    // An operator that knows a working master does not need the sentinels.
    CHECK(known->extend("k", "token-1", 10000ms));

    for (std::size_t s = 0; s < SentinelServers::kSentinels; ++s) set.killSentinel(s);
    auto another = sentinelOperator(set.uri(timeouts));
    start = Steady::now();
    try {
      (void)another->lock("k", "token-3", 10000ms);
      FAIL("acquired without any sentinel");
    } catch (const dlock::ConnectionError& error) {
      const std::string message = error.what();
      for (std::size_t s = 0; s < SentinelServers::kSentinels; ++s) {
        CHECK(message.find(portText(set.sentinelPort(s))) != std::string::npos);  // each one's answer is named
      }
    }
    CHECK(Steady::now() - start < 1s);  // refused connections fail at once
    CHECK(known->unlock("k", "token-1").released);

    // With the master gone as well, the operator that knew it fails the same way.
    set.killData(0);
    CHECK_THROWS_AS((void)known->lock("k", "token-4", 10000ms), dlock::ConnectionError);
  }

  TEST_CASE("sentinels and data nodes with different passwords, none of which appears in messages") {
    SentinelServers::Options options;
    options.dataPassword = "data-secret";
    options.sentinelPassword = "sentinel-secret";
    SentinelServers set(options);
    const std::string base = set.uri();
    const std::string withCredentials =
        "redis+sentinel://:data-secret@" + base.substr(std::string("redis+sentinel://").size());

    auto backend = sentinelOperator(withCredentials + "?sentinel_password=sentinel-secret");
    REQUIRE(backend->lock("k", "token-1", 10000ms).acquired);
    CHECK(set.dataClient(0).ok({"GET", "dlock:{k}"}).str == "token-1");
    CHECK(backend->describe().find("secret") == std::string::npos);

    // connect() asks the sentinels at once and names the fix.
    try {
      (void)dlock::connect(withCredentials);
      FAIL("connect without the sentinel password succeeded");
    } catch (const dlock::BackendError& error) {
      CHECK_MESSAGE(std::string(error.what()).find("the sentinels refused (NOAUTH or WRONGPASS): give their "
                                                    "credentials as sentinel_password=") != std::string::npos,
                    error.what());
      CHECK(std::string(error.what()).find("secret") == std::string::npos);
    }
    CHECK_NOTHROW((void)dlock::connect(withCredentials + "?sentinel_password=sentinel-secret"));

    // The data password alone: the sentinels refuse, which waiting will not mend.
    auto noSentinelPassword = sentinelOperator(withCredentials);
    try {
      (void)noSentinelPassword->lock("k", "token-2", 10000ms);
      FAIL("acquired without the sentinel password");
    } catch (const dlock::BackendError& error) {
      CHECK(std::string(error.what()).find("NOAUTH") != std::string::npos);
      CHECK(std::string(error.what()).find("secret") == std::string::npos);
    }
    // Asked again at once, the remembered answer is given: still a refusal, not a connection problem.
    CHECK_THROWS_WITH_AS((void)noSentinelPassword->lock("k", "token-2", 10000ms), doctest::Contains("NOAUTH"),
                         dlock::BackendError);
    // The sentinel password as the data password: the master refuses AUTH.
    auto swapped = sentinelOperator(base.substr(0, std::string("redis+sentinel://").size()) + ":sentinel-secret@" +
                                    base.substr(std::string("redis+sentinel://").size()) +
                                    "?sentinel_password=sentinel-secret");
    try {
      (void)swapped->lock("k", "token-3", 10000ms);
      FAIL("acquired with the wrong data password");
    } catch (const dlock::BackendError& error) {
      CHECK(std::string(error.what()).find("AUTH") != std::string::npos);
      CHECK(std::string(error.what()).find("secret") == std::string::npos);
    }
    // A master name the sentinels do not monitor.
    auto unknown = sentinelOperator(set.uri("sentinel_password=sentinel-secret").replace(
        base.rfind("/mymaster"), std::string("/mymaster").size(), "/nosuchmaster"));
    CHECK_THROWS_WITH_AS((void)unknown->lock("k", "token-4", 10000ms),
                         doctest::Contains("does not know master 'nosuchmaster'"), dlock::ConnectionError);
  }

  TEST_CASE("a master demoted behind the sentinels' back answers READONLY: ConnectionError, never acquired") {
    SentinelServers set;
    auto backend = sentinelOperator(set.uri("connect_timeout=200ms&command_timeout=200ms"));
    REQUIRE(backend->lock("k", "token-1", 10000ms).acquired);
    // Sentinels frozen, the roles swapped by hand: the operator's master is now a replica.
    for (std::size_t s = 0; s < SentinelServers::kSentinels; ++s) set.pauseSentinel(s);
    (void)set.dataClient(1).ok({"REPLICAOF", "NO", "ONE"});
    (void)set.dataClient(0).ok({"REPLICAOF", "127.0.0.1", std::to_string(set.dataPort(1))});
    REQUIRE(eventually([&] { return set.role(0) == "slave"; }, dlock::test::kEventBudget));
    std::this_thread::sleep_for(150ms);  // past the pause between two resolutions

    // READONLY sends the operator back to the sentinels, which do not answer in time.
    try {
      (void)backend->lock("other", "token-2", 10000ms);
      FAIL("acquired on a replica");
    } catch (const dlock::ConnectionError& error) {
      CHECK(std::string(error.what()).find("READONLY") != std::string::npos);
      CHECK(std::string(error.what()).find("no master 'mymaster' confirmed") != std::string::npos);
    }
    CHECK_THROWS_AS((void)backend->unlock("k", "token-1"), dlock::ConnectionError);
    CHECK(set.dataClient(0).ok({"EXISTS", "dlock:{other}"}).integer == 0);
    CHECK(set.dataClient(1).ok({"EXISTS", "dlock:{other}"}).integer == 0);
  }

  TEST_CASE("bad options are ConfigError and construction contacts nothing") {
    CHECK_THROWS_AS(dlock::SentinelOperator(dlock::SentinelOptions{}), dlock::ConfigError);
    dlock::SentinelOptions options;
    options.sentinels = {{"127.0.0.1", 1}};
    CHECK_THROWS_WITH_AS(dlock::SentinelOperator{options}, doctest::Contains("no master name"), dlock::ConfigError);
    options.masterName = "mymaster";
    options.waitReplicas = 1;
    options.waitTimeout = 0ms;
    CHECK_THROWS_WITH_AS(dlock::SentinelOperator{options}, doctest::Contains("waitTimeout"), dlock::ConfigError);
    options.sentinels = {{"127.0.0.1", 0}};
    options.waitTimeout = 10ms;
    CHECK_THROWS_AS(dlock::SentinelOperator{options}, dlock::ConfigError);
    CHECK_THROWS_AS((void)dlock::connect("redis+sentinel://127.0.0.1:1"), dlock::ConfigError);  // no master name
    CHECK_THROWS_AS((void)dlock::connect("redis+sentinel://127.0.0.1:1/m?wait_replicas=x"), dlock::ConfigError);

    // Port 1 on loopback has no sentinel: nothing is contacted until the first call.
    auto backend = sentinelOperator("redis+sentinel://u:pw@127.0.0.1:1,127.0.0.1:2/m/3?wait_replicas=1");
    CHECK(backend->describe() == "redis+sentinel://127.0.0.1:1,127.0.0.1:2/m");
    CHECK(backend->masterAddress().empty());
    CHECK_THROWS_AS((void)backend->inspect("k"), dlock::ConnectionError);
  }

  TEST_CASE("scripts/sentinel-start starts a master, two replicas and three sentinels, and sentinel-stop stops them") {
    const dlock::test::TempDir dir;
    const std::string scripts = std::string(DLOCK_SOURCE_DIR) + "/scripts";
    const auto [status, uri] = dlock::test::runScript(scripts + "/sentinel-start " + dir.path());
    CHECK(status == 0);
    const std::vector<pid_t> pids = dlock::test::pidsIn(
        dir.path(), {"master", "replica-1", "replica-2", "sentinel-1", "sentinel-2", "sentinel-3"});
    REQUIRE(pids.size() == 6);
    REQUIRE(uri.rfind("redis+sentinel://127.0.0.1:", 0) == 0);
    {
      auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(10s).build();
      CHECK(lock->tryLock("scripted", 2s));
      CHECK(lock->fencingToken("scripted") > 0);
      lock->unlock("scripted");
    }
    CHECK(std::system((scripts + "/sentinel-stop " + dir.path()).c_str()) == 0);
    for (pid_t pid : pids) CHECK_FALSE(dlock::test::processAlive(pid));
  }
}
