// SPDX-License-Identifier: Apache-2.0
// The semaphore against a real redis-server: the cases of SemaphoreScenarios.h (which also run on
// the memory operator), and what only a server shows: TTLs and key names, the channel each
// admitted waiter hears, a reply lost under a paused server, the watchdog's batch, and the server calls
// of an uncontended cycle beside the exclusive lock's.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "SemaphoreScenarios.h"
#include "TestHelpers.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
namespace sem = dlock::test::sem;

namespace {

std::int64_t serverMillis(RedisClient& client) {
  const auto time = client.ok({"TIME"});
  return std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
}

dlock::ISemaphoreOperator& semaphoreOf(const std::shared_ptr<dlock::IOperator>& backend) {
  return dynamic_cast<dlock::ISemaphoreOperator&>(*backend);
}

// A server, a client that looks at its keys, and the semaphore under test.
struct RedisSemaphoreFixture {
  RedisProcess server;
  RedisClient client{server.host(), server.port()};
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
  dlock::ISemaphoreOperator& semaphore = semaphoreOf(backend);
  // Returns once the server's clock (what the scripts read) has moved on by `step`.
  sem::PassTime passTime = [this](std::chrono::milliseconds step) {
    const std::int64_t target = serverMillis(client) + step.count();
    while (serverMillis(client) < target) std::this_thread::sleep_for(10ms);
  };

  std::string key(const std::string& name, const char* part) { return "dlock:{" + name + "}:sem:" + part; }

  // Every call the server counted (scripts' inner calls included), but this client's own.
  long long serverCalls() {
    long long calls = 0;
    for (const auto& [command, count] : client.commandCalls()) {
      if (command.rfind("info", 0) != 0 && command.rfind("config", 0) != 0) calls += count;
    }
    return calls;
  }
};

}  // namespace

TEST_SUITE("SemaphoreOnRedis") {
  DLOCK_SEMAPHORE_SCENARIOS(RedisSemaphoreFixture, "Redis semaphore: ")

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: bad input is an InvalidArgumentError and nothing is sent") {
    (void)client.ok({"CONFIG", "RESETSTAT"});
    sem::badInputIsRefusedBeforeAnythingIsSent(semaphore, "bad");
    CHECK(serverCalls() == 0);
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: three keys under the name's tag, each with a TTL past its longest lease") {
    const auto longLease = std::chrono::hours(48);  // past the keys' own life (the fence TTL, a day)
    REQUIRE(semaphore.acquirePermits("ttl", sem::kA, 1, 2, longLease, 0ms).acquired);
    REQUIRE(semaphore.acquirePermits("ttl", sem::kB, 1, 2, 10s, 0ms).acquired);
    REQUIRE(semaphore.acquirePermits("ttl", sem::kC, 1, 2, 10s, 5s).position == 1);
    REQUIRE(semaphore.releasePermits("ttl", sem::kB).notified == 1);  // a record, a grant
    REQUIRE_FALSE(semaphore.leavePermitQueue("ttl", sem::kD));         // a tombstone
    REQUIRE(semaphore.acquirePermits("ttl", sem::kD, 1, 2, 10s, 0ms).position == 0);
    REQUIRE_FALSE(semaphore.acquirePermits("ttl", sem::token('e'), 1, 2, 10s, 5s).acquired);  // a queue
    std::vector<std::string> keys;
    for (const auto& each : client.ok({"KEYS", "*"}).elements) keys.push_back(each.str);
    std::sort(keys.begin(), keys.end());
    CHECK(keys == std::vector<std::string>{key("ttl", "deadlines"), key("ttl", "queue"), key("ttl", "state")});
    for (const std::string& each : keys) {
      CAPTURE(each);
      CHECK(client.ok({"PTTL", each}).integer > std::chrono::milliseconds(longLease - 1h).count());
    }
    dlock::test::checkEveryLockKeyHasTtl(client);
    // The lock of the same name (0.2 clients) is another key, untouched.
    CHECK(backend->lock("ttl", sem::kA, 10s).acquired);
    CHECK(semaphore.inspectSemaphore("ttl").inUse == 2);
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: the keys live the fence TTL past the last call, never less than a lease") {
    auto hourly = dlock::connect(server.uri() + "?fence_ttl=1h");
    REQUIRE(semaphoreOf(hourly).acquirePermits("life", sem::kA, 1, 1, 10s, 0ms).acquired);
    const long long pttl = client.ok({"PTTL", key("life", "state")}).integer;
    CHECK(pttl > std::chrono::milliseconds(59min).count());
    CHECK(pttl <= std::chrono::milliseconds(1h).count());
    // Both set in one script: the same absolute expiry (two PTTL reads may straddle a millisecond).
    CHECK(client.ok({"PEXPIRETIME", key("life", "deadlines")}).integer ==
          client.ok({"PEXPIRETIME", key("life", "state")}).integer);
    // Forgotten once idle past it: the next user stores its own capacity, and tokens still rise.
    const std::uint64_t before = semaphoreOf(hourly).acquirePermits("life", sem::kA, 1, 1, 10s, 0ms).fencingToken;
    (void)client.ok({"DEL", key("life", "state"), key("life", "deadlines")});  // what the TTL does an hour later
    const dlock::SemaphoreAcquireResult after = semaphore.acquirePermits("life", sem::kB, 2, 2, 10s, 0ms);
    CHECK(after.acquired);
    CHECK(after.fencingToken > before);  // floored at the server's clock in µs
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: fencing tokens are exact in 64 bits and stop at 2^63 - 1 before anything is written") {
    REQUIRE(semaphore.acquirePermits("fence", sem::kA, 1, 3, 10s, 0ms).acquired);
    (void)client.ok({"HSET", key("fence", "state"), "#fence", "9007199254740993"});  // 2^53 + 1: no double holds it
    CHECK(semaphore.acquirePermits("fence", sem::kB, 1, 3, 10s, 0ms).fencingToken == 9007199254740994ULL);
    (void)client.ok({"HSET", key("fence", "state"), "#fence", std::to_string(dlock::kMaxFencingToken - 1)});
    CHECK(semaphore.acquirePermits("fence", sem::kC, 1, 3, 10s, 0ms).fencingToken == dlock::kMaxFencingToken);
    REQUIRE(semaphore.releasePermits("fence", sem::kC).released);
    CHECK_THROWS_AS((void)semaphore.acquirePermits("fence", sem::kD, 1, 3, 10s, 0ms), dlock::BackendError);
    const dlock::SemaphoreInfo info = semaphore.inspectSemaphore("fence");
    CHECK(info.inUse == 2);  // the refused grant took nothing
    CHECK(info.holders.size() == 2);
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: each admitted waiter is told on its process's grant channel") {
    REQUIRE(semaphore.acquirePermits("told", sem::kA, 3, 3, 10s, 0ms).acquired);
    for (const std::string& waiter : {sem::kB, sem::kC}) {
      REQUIRE_FALSE(semaphore.acquirePermits("told", waiter, 1, 3, 10s, 5s).acquired);
    }
    // The place names the listener: the waiter's process's channel.
    const std::string place = client.ok({"HGET", key("told", "state"), sem::kB}).str;
    const std::string listener = place.substr(place.rfind('|') + 1);
    REQUIRE_FALSE(listener.empty());
    RedisClient listening(server.host(), server.port());
    (void)listening.ok({"PSUBSCRIBE", key("told", "granted") + ":*"});
    const dlock::ReleaseResult release = semaphore.releasePermits("told", sem::kA);
    REQUIRE(release.notified == 2);
    std::map<std::string, std::string> payloads;  // by token
    for (int i = 0; i < 2; ++i) {
      const auto message = listening.next();  // pmessage, pattern, channel, payload
      REQUIRE(message.elements.size() == 4);
      CHECK(message.elements[2].str == key("told", "granted") + ":" + listener);
      const std::string& payload = message.elements[3].str;
      payloads[payload.substr(0, payload.find('|'))] = payload;
    }
    CHECK(payloads.count(sem::kB) == 1);
    CHECK(payloads.count(sem::kC) == 1);
    // token|fence|now-ms|claim-ms, as the fair lock's hand-off
    const std::string& told = payloads[sem::kB];
    CHECK(std::count(told.begin(), told.end(), '|') == 3);
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: a reply lost under a paused server is settled by the token") {
    auto impatient = dlock::connect(server.uri() + "?command_timeout=200ms");
    dlock::ISemaphoreOperator& hasty = semaphoreOf(impatient);
    REQUIRE(hasty.acquirePermits("lost", sem::kA, 1, 2, 30s, 0ms).acquired);  // connected, scripts loaded
    server.pause();
    CHECK_THROWS_AS((void)hasty.acquirePermits("lost", sem::kB, 1, 2, 30s, 0ms), dlock::ConnectionError);
    server.resume();
    // Whether the lost try ran or not, asking again with its token is one grant, counted once.
    const dlock::SemaphoreAcquireResult settled =
        dlock::test::onceRecovered([&] { return hasty.acquirePermits("lost", sem::kB, 1, 2, 30s, 0ms); });
    CHECK(settled.acquired);
    CHECK(semaphore.inspectSemaphore("lost").inUse == 2);
    // Given up instead, it leaks nothing.
    REQUIRE(semaphore.releasePermits("lost", sem::kA).released);
    server.pause();
    CHECK_THROWS_AS((void)hasty.acquirePermits("lost", sem::kC, 1, 2, 30s, 0ms), dlock::ConnectionError);
    server.resume();
    (void)dlock::test::onceRecovered([&] { return hasty.leavePermitQueue("lost", sem::kC); });
    CHECK(semaphore.inspectSemaphore("lost").inUse == 1);
    CHECK(semaphore.acquirePermits("lost", sem::kD, 1, 2, 30s, 0ms).acquired);
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: a watchdog batch over several names is one script call, each lease's outcome its own") {
    // Seven leases over three names (two on one name twice over), one released, one never held.
    const std::vector<std::string> names = {"batch-a", "batch-b", "batch-c"};
    std::vector<dlock::LeaseRef> leases;
    for (const std::string& name : names) {
      for (const std::string* token : {&sem::kA, &sem::kB}) {
        REQUIRE(semaphore.acquirePermits(name, *token, 1, 2, 10s, 0ms).acquired);
        leases.push_back({name, *token});
      }
    }
    REQUIRE(semaphore.releasePermits("batch-b", sem::kB).released);
    leases.push_back({"batch-c", sem::kC});
    (void)semaphore.extendPermitsAll(leases, 60s);  // its scripts loaded
    (void)client.ok({"CONFIG", "RESETSTAT"});
    const std::vector<dlock::ExtendResult> renewed = semaphore.extendPermitsAll(leases, 60s);
    const auto calls = client.commandCalls();
    const long long scripts = (calls.count("evalsha") != 0 ? calls.at("evalsha") : 0) +
                              (calls.count("eval") != 0 ? calls.at("eval") : 0);
    MESSAGE("script calls for ", leases.size(), " leases over ", names.size(), " names: ", scripts);
    CHECK(scripts == 1);
    REQUIRE(renewed.size() == leases.size());
    for (std::size_t i = 0; i < leases.size(); ++i) {
      CAPTURE(i);
      CHECK_FALSE(renewed[i].unknown);
      CHECK(renewed[i].extended == (i != 3 && i != 6));  // batch-b's kB released, batch-c's kC never held
    }
    for (const std::string& name : names) {
      for (const auto& holder : semaphore.inspectSemaphore(name).holders) CHECK(holder.remaining > 10s);
    }
    // The released lease stays released: its permit was not taken back.
    CHECK(semaphore.inspectSemaphore("batch-b").inUse == 1);
    CHECK(semaphore.extendPermitsAll({}, 60s).empty());
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: wait_replicas applies (its tests are SemaphoreTopology's, on Sentinel)") {
    // Sentinel's option; made lazily, so nothing is contacted.
    auto waiting = dlock::connect("redis+sentinel://127.0.0.1:1/m?wait_replicas=1", dlock::ConnectOptions{true});
    CHECK(semaphoreOf(waiting).semaphoreUnsupported().empty());
    CHECK(semaphore.semaphoreUnsupported().empty());
  }

  TEST_CASE_FIXTURE(RedisSemaphoreFixture, "Redis semaphore: an uncontended acquire and release make no more server calls than the lock's") {
    constexpr int kCycles = 200;
    const auto perCycle = [&](const auto& cycle) {
      cycle(-1);  // connected, scripts cached
      (void)client.ok({"CONFIG", "RESETSTAT"});
      for (int i = 0; i < kCycles; ++i) cycle(i);
      return static_cast<double>(serverCalls()) / kCycles;
    };
    const double lock = perCycle([&](int i) {
      const std::string token = sem::token(static_cast<char>('a' + (i + 1) % 26)) + std::to_string(i + 1);
      REQUIRE(backend->lock("cycle", token, 10s).acquired);
      REQUIRE(backend->unlock("cycle", token).released);
    });
    const double permits = perCycle([&](int i) {
      const std::string token = sem::token(static_cast<char>('a' + (i + 1) % 26)) + std::to_string(i + 1);
      REQUIRE(semaphore.acquirePermits("cycle", token, 1, 4, 10s, 0ms).acquired);
      REQUIRE(semaphore.releasePermits("cycle", token).released);
    });
    MESSAGE("server calls per uncontended cycle: lock ", lock, ", semaphore ", permits);
    CHECK(permits <= lock);
  }
}
