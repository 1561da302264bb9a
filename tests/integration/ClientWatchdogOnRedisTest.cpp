// SPDX-License-Identifier: Apache-2.0
// One watchdog behind a dlock::Client against a real redis-server: one thread for a lock, a fair
// lock, a write and a read hold and permits held at once; one pipeline per tick (the server's read
// events), each kind by its own script; each primitive's loss to its own handler when its keys
// are deleted; close() of one leaving the others renewed; a forked child renewing only its own;
// elections from the client renewed in the same call as its locks.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ForkedChild.h"
#include "HiredisCommand.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "ThreadState.h"
#include "dlock/Client.h"
#include "dlock/IRenewalBatch.h"
#include "dlock/connect.h"
#include "dlock/LockError.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

constexpr const char* kWatchdogThread = "dlock-watchdog";

// What the server counted: its read events (one per batch of commands a client's write brought)
// and its EVALSHA calls, from one INFO (whose own read is counted in it).
struct ServerCounts {
  long long reads = 0;
  long long evalsha = 0;
};

ServerCounts countsOf(RedisClient& redis) {
  const std::string info = redis.ok({"INFO", "everything"}).str;
  const std::string field = "total_reads_processed:";
  const auto at = info.find(field);
  REQUIRE_MESSAGE(at != std::string::npos, "INFO has no total_reads_processed (Redis 6 or later)");
  ServerCounts counts;
  counts.reads = std::stoll(info.substr(at + field.size()));
  const auto calls = dlock::test::commandCallsIn(info);
  const auto evalsha = calls.find("evalsha");
  counts.evalsha = evalsha == calls.end() ? 0 : evalsha->second;
  return counts;
}

// Deletes every key of the user key `key` (its lock, fence, queue and companions).
void deleteKeysOf(RedisClient& redis, const std::string& key) {
  const auto keys = redis.ok({"KEYS", "dlock:{" + key + "}*"});
  REQUIRE_FALSE(keys.elements.empty());
  for (const auto& each : keys.elements) redis.ok({"DEL", each.str});
}

// A client on a virtual clock (30 s leases, renewed every 10 s of it) holding a lock, a fair
// lock, a write and a read hold and two permits at once, on its own server.
struct HeldOnRedis {
  RedisProcess server;
  RedisClient redis{server.host(), server.port()};
  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  dlock::Client client{server.uri(), dlock::ClientOptions{{}, clock, nullptr}};
  const int threadsBefore = dlock::test::threadsNamed(kWatchdogThread);
  std::shared_ptr<dlock::ILock> lock = client.getLock("orders");
  std::shared_ptr<dlock::ILock> fair = client.getFairLock("queue");
  std::shared_ptr<dlock::ReadWriteLock> config = client.getReadWriteLock("config");
  std::shared_ptr<dlock::Semaphore> partner = client.getSemaphore("partner-api", 3);
  dlock::PermitLease permits;

  HeldOnRedis() {
    REQUIRE(lock->tryLock());
    REQUIRE(fair->tryLock());
    REQUIRE(config->writeLock()->tryLock("config:w"));
    REQUIRE(config->readLock()->tryLock("config:r"));
    permits = partner->tryAcquire(2);
    REQUIRE(permits);
  }
  ~HeldOnRedis() {
    permits = dlock::PermitLease();
    client.close();
  }

  [[nodiscard]] std::map<std::string, std::uint64_t> renewals() const {
    return {{"orders", lock->stats().renewals},
            {"queue", fair->stats().renewals},
            {"config", config->readLock()->stats().renewals},
            {"partner-api", partner->stats().renewals}};
  }
};

// The keys each primitive's handler heard of.
struct LossLog {
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> heard;  // guarded by mutex

  dlock::ILock::LostHandler to(const std::string& primitive) {
    return [this, primitive](std::string_view key, std::uint64_t) {
      std::lock_guard<std::mutex> guard(mutex);
      heard[primitive].emplace_back(key);
    };
  }
  std::vector<std::string> of(const std::string& primitive) {
    std::lock_guard<std::mutex> guard(mutex);
    return heard[primitive];
  }
  std::size_t total() {
    std::lock_guard<std::mutex> guard(mutex);
    std::size_t count = 0;
    for (const auto& [primitive, keys] : heard) count += keys.size();
    return count;
  }
};

}  // namespace

TEST_SUITE("ClientOnRedis") {
  TEST_CASE_FIXTURE(HeldOnRedis, "a client holding every kind at once runs one watchdog thread and renews them in one pipeline per tick") {
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
    clock->advance(10s);  // the first round loads the renewal scripts (NOSCRIPT, then EVAL)
    for (const auto& each : renewals()) CHECK_MESSAGE(each.second == (each.first == "config" ? 2 : 1), each.first);
    const ServerCounts before = countsOf(redis);
    clock->advance(10s);
    const ServerCounts after = countsOf(redis);
    for (const auto& each : renewals()) CHECK_MESSAGE(each.second == (each.first == "config" ? 4 : 2), each.first);
    // One read event for the round's pipeline, one for the INFO that counted it.
    CHECK(after.reads - before.reads == 2);
    // Each kind by its own script: extendMany (the lock and the fair lock), rwExtend (both
    // sides), semExtendMany.
    CHECK(after.evalsha - before.evalsha == 3);
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
  }

  TEST_CASE("a client's two elections' terms and a lock's hold are renewed by one script call in one pipeline per tick") {
    RedisProcess server;
    RedisClient redis(server.host(), server.port());
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::ClientOptions options{{}, clock, nullptr};
    options.lock.watchdogLease = 15s;  // the elections' term lease: every lease due in the same round
    dlock::Client client(server.uri(), options);
    const int threadsBefore = dlock::test::threadsNamed(kWatchdogThread);
    dlock::Leadership scheduler = client.getElection("scheduler")->campaign("host-a");
    dlock::Leadership compactor = client.getElection("compactor")->campaign("host-a");
    const auto lock = client.getLock("orders");
    REQUIRE(lock->tryLock());
    clock->advance(5s);  // the first round loads the renewal script
    const ServerCounts before = countsOf(redis);
    clock->advance(5s);
    const ServerCounts after = countsOf(redis);
    CHECK(lock->stats().renewals == 2);
    CHECK(after.reads - before.reads == 2);      // the round's pipeline, and the INFO that counted it
    CHECK(after.evalsha - before.evalsha == 1);  // one extendMany for the three holds of one lease
    CHECK(scheduler.isLeader());
    CHECK(compactor.isLeader());
    CHECK(redis.ok({"PTTL", "dlock:{election:scheduler}"}).integer > 0);
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
    lock->unlock();
    client.close();
    CHECK(redis.ok({"EXISTS", "dlock:{election:scheduler}"}).integer == 0);  // resigned by close()
  }

  TEST_CASE_FIXTURE(HeldOnRedis, "each primitive's loss reaches its own handler when its keys are deleted") {
    LossLog log;
    lock->onLockLost(log.to("orders"));
    fair->onLockLost(log.to("queue"));
    config->writeLock()->onLockLost(log.to("config"));
    partner->onPermitsLost(log.to("partner-api"));
    const std::vector<std::pair<std::string, std::string>> order = {
        {"orders", "orders"}, {"config", "config:w"}, {"partner-api", "partner-api"}, {"queue", "queue"}};
    std::size_t lost = 0;
    for (const auto& [primitiveOf, keyOf] : order) {
      const std::string primitive = primitiveOf;  // a structured binding cannot be captured in C++17
      const std::string key = keyOf;
      deleteKeysOf(redis, key);
      clock->advance(10s);  // the next round finds these keys gone, the others renewed
      ++lost;
      REQUIRE_MESSAGE(dlock::test::eventually([&] { return log.total() == lost; }), key);
      CHECK(log.of(primitive).back() == key);
    }
    CHECK(log.of("orders") == std::vector<std::string>{"orders"});
    CHECK(log.of("config") == std::vector<std::string>{"config:w"});  // the read hold is still renewed
    CHECK(config->readLock()->isHeld("config:r"));
    CHECK(lock->stats().lostLeases == 1);
    CHECK(partner->stats().lostLeases == 1);
    CHECK(fair->stats().lostLeases == 1);
  }

  TEST_CASE_FIXTURE(HeldOnRedis, "close() of one primitive leaves the others renewed") {
    clock->advance(10s);  // loads the scripts
    lock->close();        // releases the thread hold it keeps
    CHECK(redis.ok({"EXISTS", "dlock:{orders}"}).integer == 0);
    auto extra = client.lockBuilder().name("extra").build();
    REQUIRE(extra->tryLock("x"));
    extra.reset();  // destroyed: its lease released, its part of the watchdog gone
    CHECK(redis.ok({"EXISTS", "dlock:{x}"}).integer == 0);
    const auto renewedBefore = renewals();
    const ServerCounts before = countsOf(redis);
    clock->advance(10s);
    const ServerCounts after = countsOf(redis);
    auto now = renewals();
    CHECK(now["orders"] == renewedBefore.at("orders"));
    CHECK(now["queue"] == renewedBefore.at("queue") + 1);
    CHECK(now["config"] == renewedBefore.at("config") + 2);
    CHECK(now["partner-api"] == renewedBefore.at("partner-api") + 1);
    CHECK(after.reads - before.reads == 2);
    clock->advance(25s);
    CHECK(fair->isHeld());
    CHECK(config->writeLock()->isHeld("config:w"));
    CHECK(permits.isHeld());
    CHECK(redis.ok({"EXISTS", "dlock:{queue}"}).integer == 1);
  }

#if DLOCK_TEST_FORK_WITH_THREADS  // the child starts a thread: see tests/CMakeLists.txt
  TEST_CASE("a child forked with the client's leases held renews its own on a thread of its own, never the parent's") {
    RedisProcess server;
    RedisClient redis(server.host(), server.port());
    dlock::ClientOptions options;
    options.lock.watchdogLease = 3s;  // renewed every second of real time
    dlock::Client client(server.uri(), options);
    const int threadsBefore = dlock::test::threadsNamed(kWatchdogThread);
    const auto lock = client.getLock("orders");
    const auto config = client.getReadWriteLock("config");
    REQUIRE(lock->tryLock("parent"));
    REQUIRE(config->readLock()->tryLock("config"));
    REQUIRE(dlock::test::eventually([&] { return lock->stats().renewals >= 1; }, 10s));
    const std::string parentToken = redis.ok({"GET", "dlock:{parent}"}).str;
    dlock::test::ForkedChild child([&] {
      // The parent's threads are not here: the child's first renewed hold starts its own.
      if (dlock::test::threadsNamed(kWatchdogThread) != 0) return 10;
      if (!lock->tryLock("child")) return 11;
      if (!config->readLock()->tryLock("child-config")) return 12;
      if (dlock::test::threadsNamed(kWatchdogThread) != 1) return 13;
      const auto renewed = lock->stats().renewals;
      if (!dlock::test::eventually([&] { return lock->stats().renewals >= renewed + 2; }, 10s)) return 14;
      try {
        lock->unlock("parent");  // the parent's: not the child's to release
        return 15;
      } catch (const dlock::NotOwnerError&) {
      }
      lock->unlock("child");
      config->readLock()->unlock("child-config");
      return 0;
    });
    CHECK(child.exitStatus(30s) == 0);
    CHECK(redis.ok({"GET", "dlock:{parent}"}).str == parentToken);  // neither released nor taken by the child
    const auto renewed = lock->stats().renewals;
    REQUIRE(dlock::test::eventually([&] { return lock->stats().renewals >= renewed + 2; }, 10s));
    CHECK(lock->isHeld("parent"));
    CHECK(config->readLock()->isHeld("config"));
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
    lock->unlock("parent");
    config->readLock()->unlock("config");
  }
#endif

  TEST_CASE("renewBatch renews every kind by its own script in one pipeline, and tells held from gone") {
    RedisProcess server;
    RedisClient redis(server.host(), server.port());
    const auto backend = dlock::connect(server.uri());
    auto& rw = dynamic_cast<dlock::IReadWriteOperator&>(*backend);
    auto& permits = dynamic_cast<dlock::ISemaphoreOperator&>(*backend);
    auto& conditions = dynamic_cast<dlock::IConditionOperator&>(*backend);
    auto& batch = dynamic_cast<dlock::IRenewalBatch&>(*backend);
    REQUIRE(backend->lock("k", "t1", 30s).acquired);
    REQUIRE(rw.acquireWrite("w", "t2", 30s, 5s).acquired);
    REQUIRE(rw.acquireRead("r", "t3", 30s, 5s).acquired);
    REQUIRE(permits.acquirePermits("s", "t4", 2, 3, 30s, 5s).acquired);
    const dlock::AcquireResult held = backend->lock("c", "t5", 30s);
    REQUIRE(held.acquired);
    REQUIRE(conditions.await("c", "ready", "t5", dlock::ConditionLock::Exclusive, held.fencingToken, 30s, 5s).awaiting);
    using Kind = dlock::RenewalKind;
    const std::vector<dlock::Renewal> renewals = {
        {Kind::Exclusive, "k", "t1", 20s, {}, {}},     {Kind::Write, "w", "t2", 20s, {}, {}},
        {Kind::Read, "r", "t3", 20s, {}, {}},          {Kind::Permits, "s", "t4", 20s, {}, {}},
        {Kind::Awaiting, "c", "t5", 5s, "ready", 30s},  {Kind::Exclusive, "k", "other", 20s, {}, {}},
        {Kind::Read, "w", "t2", 20s, {}, {}},           {Kind::Permits, "s", "other", 20s, {}, {}},
        {Kind::Awaiting, "c", "other", 5s, "ready", 30s}};
    const std::vector<bool> expected = {true, true, true, true, true, false, false, false, false};
    CHECK(dlock::test::extendedFlags(batch.renewBatch(renewals)) == expected);  // loads the scripts
    const ServerCounts before = countsOf(redis);
    CHECK(dlock::test::extendedFlags(batch.renewBatch(renewals)) == expected);
    const ServerCounts after = countsOf(redis);
    CHECK(after.reads - before.reads == 2);      // the pipeline, and the INFO that counted it
    CHECK(after.evalsha - before.evalsha == 4);  // extendMany, rwExtend, semExtendMany, condRenew
    const long long ttl = redis.ok({"PTTL", "dlock:{k}"}).integer;
    CHECK(ttl > 10000);
    CHECK(ttl <= 20000);  // its own lease: 20 s, not the 30 s it was taken for
  }
}
