// SPDX-License-Identifier: Apache-2.0
// A lock's conditions against a real redis-server: the cases of ConditionScenarios.h (which also
// run on the memory operator), and what only a server shows: no signal falls between an await's
// release and its join however late the awaiting client's next bytes arrive, the channel each
// signalled waiter hears, every key has a TTL, 0.2 clients of the same key undisturbed, and the
// server calls of an await, a signal and the hand-off.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <type_traits>

#include "ConditionScenarios.h"
#include "LinkProxy.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/IConditionOperator.h"
#include "dlock/IFairOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/redlock/RedlockOperator.h"

using namespace std::chrono_literals;
using dlock::ConditionLock;
using dlock::test::LinkProxy;
using dlock::test::commandsSent;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::serverNow;
namespace cond = dlock::test::cond;

namespace {

// A condition's key on the server: `dlock:{key}:cond:<part>:<name in hex>`.
std::string conditionKey(const std::string& key, const std::string& part, const std::string& name) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (const char c : name) {
    hex += kHex[static_cast<unsigned char>(c) >> 4];
    hex += kHex[static_cast<unsigned char>(c) & 0xfU];
  }
  return "dlock:{" + key + "}:cond:" + part + ":" + hex;
}

cond::Backends viewsOf(dlock::IOperator& backend) {
  return {backend, dynamic_cast<dlock::IFairOperator&>(backend), dynamic_cast<dlock::IConditionOperator&>(backend)};
}

struct ConditionServer {
  RedisProcess server;
  RedisClient client{server.host(), server.port()};
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
  cond::Backends backends = viewsOf(*backend);
  dlock::IConditionOperator& conditions = backends.conditions;
  // Returns once the server's clock has moved on by `step`: the event a lease's end is.
  cond::PassTime passTime = [this](std::chrono::milliseconds step) {
    const long long until = serverNow(client) + step.count();
    REQUIRE(dlock::test::eventually([&] { return serverNow(client) > until; }, step + dlock::test::kEventBudget));
  };
  std::function<long long()> calls = [this] { return commandsSent(client); };
};

}  // namespace

TEST_SUITE("ConditionOnRedis") {
  DLOCK_CONDITION_CASES(ConditionServer, " on Redis")

  TEST_CASE_FIXTURE(ConditionServer, "a signal sent the moment await's release is heard finds the waiter, however late the awaiter's next bytes") {
    // The awaiting client's link holds every byte it sends for 300 ms: a second command of the
    // same await (a join after the release) would reach the server long after the signal.
    LinkProxy proxy(server.host(), server.port());
    std::shared_ptr<dlock::IOperator> slow = dlock::connect(proxy.uri());
    cond::Backends awaiting = viewsOf(*slow);
    const dlock::AcquireResult held = awaiting.locks.lock("window", cond::kT1, 10s);
    REQUIRE(held.acquired);
    RedisClient released(server.host(), server.port());
    released.ok({"SUBSCRIBE", "dlock:{window}:released"});
    proxy.delay(300ms, LinkProxy::Direction::toTarget);
    auto awaited = std::async(std::launch::async, [&] {
      return awaiting.conditions.await("window", cond::kName, cond::kT1, ConditionLock::Exclusive, held.fencingToken, 10s,
                                       10s);
    });
    const auto message = released.next();  // message, channel, payload: the await's release ran
    REQUIRE(message.elements.size() == 3);
    REQUIRE(backend->lock("window", cond::kT2, 10s).acquired);
    const dlock::SignalResult signalled = conditions.signal("window", cond::kName, cond::kT2, ConditionLock::Exclusive);
    CHECK(signalled.owner);
    CHECK(signalled.moved == 1);  // a join that had not run yet would lose this signal
    const dlock::AwaitResult result = awaited.get();
    CHECK(result.awaiting);
    CHECK(result.position == 1);
    CHECK_FALSE(conditions.renewAwait({"window", cond::kName, cond::kT1, 10s}, 10s));  // signalled
  }

  TEST_CASE_FIXTURE(ConditionServer, "each signalled waiter hears it on its process's channel, and nobody else is told") {
    for (const auto& token : {cond::kT1, cond::kT2}) REQUIRE(cond::holdThenAwait(backends, "heard", token).awaiting);
    const std::string place = client.ok({"LINDEX", conditionKey("heard", "waiters", cond::kName), "0"}).str;
    REQUIRE(place.rfind(cond::kT1 + "|10000.0", 0) == 0);
    const std::string listener = place.substr(place.find('.') + 1);
    CHECK(listener.substr(18) == std::to_string(::getpid()));
    RedisClient watcher(server.host(), server.port());
    watcher.ok({"PSUBSCRIBE", "dlock:{heard}:*"});
    REQUIRE(backend->lock("heard", cond::kT3, 10s).acquired);
    const long long before = serverNow(client);
    REQUIRE(conditions.signalAll("heard", cond::kName, cond::kT3, ConditionLock::Exclusive).moved == 2);
    for (const auto& token : {cond::kT1, cond::kT2}) {
      const auto message = watcher.next();  // pmessage, pattern, channel, payload
      REQUIRE(message.elements.size() == 4);
      CHECK(message.elements[2].str == "dlock:{heard}:cond:signalled:" + listener);
      const std::string& payload = message.elements[3].str;
      REQUIRE(payload.rfind(token + "|0|", 0) == 0);
      CHECK(std::stoll(payload.substr(token.size() + 3)) >= before);
      CHECK(payload.substr(payload.size() - 2) == "|0");
    }
    const auto pong = watcher.command({"PING"});  // nothing else was published
    REQUIRE(pong.elements.size() == 2);
    CHECK(pong.elements[0].str == "pong");
  }

  TEST_CASE_FIXTURE(ConditionServer, "after 300 conditions awaited, signalled, left and renewed, no key is without a TTL") {
    for (int i = 0; i < 300; ++i) {
      const std::string key = "many:" + std::to_string(i);
      switch (i % 4) {
        case 0:  // a fair waiter moved into the queue, still waiting there
          REQUIRE(cond::holdFairThenAwait(backends, key, cond::kT1).awaiting);
          REQUIRE(backends.fair.fairLock(key, cond::kT2, 10s, 0ms).acquired);
          REQUIRE(conditions.signal(key, cond::kName, cond::kT2, ConditionLock::Fair).moved == 1);
          break;
        case 1:  // waiting, renewed
          REQUIRE(cond::holdThenAwait(backends, key, cond::kT1).awaiting);
          REQUIRE(conditions.renewAwait({key, cond::kName, cond::kT1, 10s}, 20s));
          break;
        case 2:  // left
          REQUIRE(cond::holdThenAwait(backends, key, cond::kT1).awaiting);
          REQUIRE(conditions.leaveCondition(key, cond::kName, cond::kT1, 10s));
          break;
        default:  // signalled, and re-acquired
          REQUIRE(cond::holdThenAwait(backends, key, cond::kT1).awaiting);
          REQUIRE(backend->lock(key, cond::kT2, 10s).acquired);
          REQUIRE(conditions.signal(key, cond::kName, cond::kT2, ConditionLock::Exclusive).moved == 1);
          REQUIRE(backend->unlock(key, cond::kT2).released);
          REQUIRE(backend->lock(key, cond::kT1, 10s).acquired);
          break;
      }
    }
    dlock::test::checkEveryLockKeyHasTtl(client);
    CHECK(client.ok({"EXISTS", conditionKey("many:1", "leases", cond::kName)}).integer == 1);
    CHECK(client.ok({"EXISTS", "dlock:{many:0}:fair:queue"}).integer == 1);
  }

  TEST_CASE_FIXTURE(ConditionServer, "a 0.2 client of the same key hears an await's release, and its own hold is left as it is") {
    // 0.2's acquire script: SET <prefix>{key} token NX PX; its waiters listen on <prefix>{key}:released.
    RedisClient oldWaiter(server.host(), server.port());
    oldWaiter.ok({"SUBSCRIBE", "dlock:{shared}:released"});
    REQUIRE(cond::holdThenAwait(backends, "shared", cond::kT1).notified == 1);
    const auto message = oldWaiter.next();
    REQUIRE(message.elements.size() == 3);
    CHECK(message.elements[2].str == "1");
    client.ok({"SET", "dlock:{shared}", "old-client-token", "PX", "60000"});
    CHECK_FALSE(conditions.await("shared", cond::kName, cond::kT2, ConditionLock::Exclusive, 1, 10s, 10s).awaiting);
    CHECK_FALSE(conditions.signalAll("shared", cond::kName, cond::kT2, ConditionLock::Exclusive).owner);
    CHECK(client.ok({"GET", "dlock:{shared}"}).str == "old-client-token");
    CHECK(conditions.inspectCondition("shared", cond::kName).waiters.size() == 1);
    CHECK(backend->unlock("shared", "old-client-token").released);
  }

  TEST_CASE_FIXTURE(ConditionServer, "the server calls of an await, a signal and the hand-off, beside the fair lock's hand-off") {
    constexpr int kCycles = 50;
    auto& fair = backends.fair;
    // Server calls (commandstats, scripts' own commands included) and round trips (EVALSHA) of
    // each step, summed over the cycles; tokens fresh per cycle, as the lock makes one per hold.
    std::map<std::string, long long> serverCalls;
    std::map<std::string, long long> trips;
    const auto step = [&](const std::string& what, const std::function<void()>& run) {
      const long long before = commandsSent(client);
      const long long tripsBefore = client.commandCalls()["evalsha"];
      run();
      serverCalls[what] += commandsSent(client) - before;
      trips[what] += client.commandCalls()["evalsha"] - tripsBefore;
    };
    for (int i = 0; i < kCycles + 1; ++i) {
      if (i == 1) {  // the first cycle loaded the scripts and made the connections
        serverCalls.clear();
        trips.clear();
      }
      const std::string holder = std::string(16, 'f') + std::to_string(1'000'000 + 3 * i);
      const std::string waiter = std::string(16, 'f') + std::to_string(1'000'001 + 3 * i);
      const std::string signaller = std::string(16, 'f') + std::to_string(1'000'002 + 3 * i);
      // The fair lock's hand-off, for reference: a queued waiter handed the key by a release.
      REQUIRE(fair.fairLock("calls", holder, 10s, 0ms).acquired);
      REQUIRE(fair.fairLock("calls", waiter, 10s, 10s).position == 1);
      step("fair release with hand-off", [&] { REQUIRE(fair.fairUnlock("calls", holder).notified == 1); });
      // The waiter awaits; a signaller takes the key, signals and releases it: handed to the waiter.
      const dlock::FairAcquireResult claimed = fair.fairLock("calls", waiter, 10s, 10s);
      REQUIRE(claimed.acquired);
      step("await (fair)", [&] {
        REQUIRE(conditions.await("calls", cond::kName, waiter, ConditionLock::Fair, claimed.fencingToken, 10s, 10s).awaiting);
      });
      REQUIRE(fair.fairLock("calls", signaller, 10s, 0ms).acquired);
      step("signal (fair)", [&] {
        REQUIRE(conditions.signal("calls", cond::kName, signaller, ConditionLock::Fair).moved == 1);
      });
      step("release with hand-off to the signalled", [&] { REQUIRE(fair.fairUnlock("calls", signaller).notified == 1); });
      step("claim (fairLock, ours already)", [&] { REQUIRE(fair.fairLock("calls", waiter, 10s, 10s).acquired); });
      REQUIRE(fair.fairUnlock("calls", waiter).released);
      // The same on an exclusive key: the signal tells the waiter, who competes for the key.
      const dlock::AcquireResult taken = backend->lock("calls:x", waiter, 10s);
      REQUIRE(taken.acquired);
      step("await (exclusive)", [&] {
        REQUIRE(conditions.await("calls:x", cond::kName, waiter, ConditionLock::Exclusive, taken.fencingToken, 10s, 10s)
                    .awaiting);
      });
      REQUIRE(backend->lock("calls:x", signaller, 10s).acquired);
      step("signal (exclusive)", [&] {
        REQUIRE(conditions.signal("calls:x", cond::kName, signaller, ConditionLock::Exclusive).moved == 1);
      });
      REQUIRE(backend->unlock("calls:x", signaller).released);
      REQUIRE(backend->lock("calls:x", waiter, 10s).acquired);
      REQUIRE(backend->unlock("calls:x", waiter).released);
    }
    for (const auto& [what, count] : serverCalls) {
      MESSAGE(what << ": " << static_cast<double>(count) / kCycles << " server calls");
      CHECK(trips[what] == kCycles);  // each step is one script: no extra round trip
    }
    const long long signalToHolding = serverCalls["signal (fair)"] + serverCalls["release with hand-off to the signalled"] +
                                      serverCalls["claim (fairLock, ours already)"];
    MESSAGE("signal + hand-off + claim: " << static_cast<double>(signalToHolding) / kCycles
                                          << " server calls; the fair lock's release with hand-off "
                                          << static_cast<double>(serverCalls["fair release with hand-off"]) / kCycles);
    // The hand-off to a signalled waiter is the fair lock's own: it costs what the fair lock's does.
    CHECK(serverCalls["release with hand-off to the signalled"] == serverCalls["fair release with hand-off"]);
  }

  TEST_CASE_FIXTURE(ConditionServer, "wait_replicas is refused with a reason, as the fair lock's, and Redlock has no conditions") {
    // Sentinel's option; made lazily, so nothing is contacted.
    auto waiting = dlock::connect("redis+sentinel://127.0.0.1:1/m?wait_replicas=1", dlock::ConnectOptions{true});
    CHECK(dynamic_cast<dlock::IConditionOperator&>(*waiting).conditionUnsupported().find("wait_replicas") !=
          std::string::npos);
    CHECK(conditions.conditionUnsupported().empty());
    static_assert(!std::is_base_of_v<dlock::IConditionOperator, dlock::RedlockOperator>,
                  "a quorum of independent servers keeps no condition");
  }
}
