// SPDX-License-Identifier: Apache-2.0
// The read-write lock's scripts against a real redis-server: the cases of ReadWriteScenarios.h
// (which also run on the memory operator), and what only a server shows: every key has a TTL,
// the channel each admitted waiter hears, 0.2 clients of the same name undisturbed, and the
// server calls of an uncontended cycle beside the exclusive lock's.
#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "ReadWriteScenarios.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"

using namespace std::chrono_literals;
using dlock::test::commandsSent;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::serverNow;
namespace rw = dlock::test::rw;

namespace {

struct ReadWriteServer {
  RedisProcess server;
  RedisClient client{server.host(), server.port()};
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
  dlock::IReadWriteOperator& readWrite = dynamic_cast<dlock::IReadWriteOperator&>(*backend);
  // Returns once the server's clock has moved on by `step`: the event a lease's end is.
  rw::PassTime passTime = [this](std::chrono::milliseconds step) {
    const long long until = serverNow(client) + step.count();
    REQUIRE(dlock::test::eventually([&] { return serverNow(client) > until; }, step + dlock::test::kEventBudget));
  };
  std::function<long long()> calls = [this] { return commandsSent(client); };
};

}  // namespace

TEST_SUITE("ReadWriteOnRedis") {
  DLOCK_READ_WRITE_CASES(ReadWriteServer, " on Redis")

  TEST_CASE_FIXTURE(ReadWriteServer, "each admitted waiter hears its grant on its process's channel, and nobody else is told") {
    REQUIRE(readWrite.acquireWrite("heard", rw::kW1, 10s, 5s).acquired);
    REQUIRE(readWrite.acquireRead("heard", rw::kR1, 10s, 5s).position == 1);
    REQUIRE(readWrite.acquireRead("heard", rw::kR2, 10s, 5s).position == 2);
    REQUIRE(readWrite.acquireWrite("heard", rw::kW2, 10s, 5s).position == 3);
    const std::string place = client.ok({"LINDEX", "dlock:{heard}:rw:queue", "0"}).str;
    REQUIRE(place.rfind("r" + rw::kR1 + "|10000.0", 0) == 0);
    const std::string listener = place.substr(place.find('.') + 1);
    CHECK(listener.substr(18) == std::to_string(::getpid()));
    RedisClient watcher(server.host(), server.port());
    watcher.ok({"PSUBSCRIBE", "dlock:{heard}:*"});
    const long long fence = std::stoll(client.ok({"GET", "dlock:{heard}:rw:fence"}).str);
    REQUIRE(readWrite.releaseWrite("heard", rw::kW1).notified == 2);
    for (const std::string& reader : {rw::kR1, rw::kR2}) {
      const auto message = watcher.next();  // pmessage, pattern, channel, payload
      REQUIRE(message.elements.size() == 4);
      CHECK(message.elements[2].str == "dlock:{heard}:rw:granted:" + listener);
      CHECK(message.elements[3].str.rfind(reader + "|" + std::to_string(fence) + "|", 0) == 0);
    }
    const auto pong = watcher.command({"PING"});  // nothing else was published (not to W2)
    REQUIRE(pong.elements.size() == 2);
    CHECK(pong.elements[0].str == "pong");
    CHECK(client.ok({"ZCARD", "dlock:{heard}:rw:readers"}).integer == 2);
  }

  TEST_CASE_FIXTURE(ReadWriteServer, "after 300 names read, written, waited for, downgraded, left and held, no key is without a TTL") {
    for (int i = 0; i < 300; ++i) {
      const std::string name = "many:" + std::to_string(i);
      switch (i % 6) {
        case 0:  // readers, a writer queued behind them, one reader leaves
          REQUIRE(readWrite.acquireRead(name, rw::kR1, 10s, 5s).acquired);
          REQUIRE_FALSE(readWrite.acquireWrite(name, rw::kW1, 10s, 5s).acquired);
          REQUIRE(readWrite.releaseRead(name, rw::kR1).notified == 1);
          break;
        case 1:  // a writer, a reader queued, the reader gives up
          REQUIRE(readWrite.acquireWrite(name, rw::kW1, 10s, 5s).acquired);
          REQUIRE_FALSE(readWrite.acquireRead(name, rw::kR1, 10s, 5s).acquired);
          (void)readWrite.leaveReadWriteQueue(name, rw::kR1, dlock::ReadWriteMode::Read, 10s);
          break;
        case 2:  // a downgrade, then released
          REQUIRE(readWrite.acquireWrite(name, rw::kW1, 10s, 5s).acquired);
          REQUIRE(readWrite.downgrade(name, rw::kW1, 10s));
          REQUIRE(readWrite.releaseRead(name, rw::kW1).released);
          break;
        case 3:  // an upgrade, extended, released
          REQUIRE(readWrite.acquireRead(name, rw::kR1, 10s, 5s).acquired);
          REQUIRE(readWrite.tryUpgrade(name, rw::kR1, 10s).acquired);
          REQUIRE(readWrite.extendReadWrite({name, rw::kR1, dlock::ReadWriteMode::Write}, 20s));
          REQUIRE(readWrite.releaseWrite(name, rw::kR1).released);
          break;
        case 4:  // one reader, left so
          REQUIRE(readWrite.acquireRead(name, rw::kR1, 10s, 5s).acquired);
          break;
        default:  // held and waited for, left so
          REQUIRE(readWrite.acquireRead(name, rw::kR1, 10s, 5s).acquired);
          REQUIRE(readWrite.acquireRead(name, rw::kR2, 10s, 5s).acquired);
          REQUIRE_FALSE(readWrite.acquireWrite(name, rw::kW1, 10s, 5s).acquired);
          break;
      }
    }
    dlock::test::checkEveryLockKeyHasTtl(client);
    CHECK(client.ok({"DBSIZE"}).integer > 300);
  }

  TEST_CASE_FIXTURE(ReadWriteServer, "a 0.2 client's exclusive lock of the same name is left as it is") {
    // 0.2's acquire script: SET <prefix>{name} token NX PX; its fence <prefix>{name}:fence.
    client.ok({"SET", "dlock:{shared}", "old-client-token", "PX", "60000"});
    client.ok({"SET", "dlock:{shared}:fence", "7", "PX", "60000"});
    REQUIRE(readWrite.acquireWrite("shared", rw::kW1, 10s, 5s).acquired);
    REQUIRE(readWrite.downgrade("shared", rw::kW1, 10s));
    REQUIRE(readWrite.acquireRead("shared", rw::kR1, 10s, 5s).acquired);
    REQUIRE(readWrite.releaseRead("shared", rw::kW1).released);
    REQUIRE(readWrite.releaseRead("shared", rw::kR1).released);
    CHECK(client.ok({"GET", "dlock:{shared}"}).str == "old-client-token");
    CHECK(client.ok({"GET", "dlock:{shared}:fence"}).str == "7");
    CHECK(backend->unlock("shared", "old-client-token").released);
  }

  TEST_CASE_FIXTURE(ReadWriteServer, "an uncontended read or write cycle costs the server no more calls than the exclusive lock's") {
    constexpr int kCycles = 200;
    // A fresh token per cycle, as the lock makes one per hold (a token's own release record would
    // cost its next acquire a look-up).
    int tokens = 0;
    const auto callsPerCycle = [&](const std::function<void(const std::string&)>& cycle) {
      const auto next = [&] { return std::string(16, 'f') + std::to_string(1'000'000 + tokens++); };
      for (int i = 0; i < 3; ++i) cycle(next());  // scripts loaded, connections made
      client.ok({"CONFIG", "RESETSTAT"});
      for (int i = 0; i < kCycles; ++i) cycle(next());
      return static_cast<double>(commandsSent(client)) / kCycles;
    };
    const double exclusive = callsPerCycle([&](const std::string& token) {
      REQUIRE(backend->lock("cycle", token, 10s).acquired);
      REQUIRE(backend->unlock("cycle", token).released);
    });
    const double write = callsPerCycle([&](const std::string& token) {
      REQUIRE(readWrite.acquireWrite("cycle", token, 10s, 5s).acquired);
      REQUIRE(readWrite.releaseWrite("cycle", token).released);
    });
    const double read = callsPerCycle([&](const std::string& token) {
      REQUIRE(readWrite.acquireRead("cycle", token, 10s, 5s).acquired);
      REQUIRE(readWrite.releaseRead("cycle", token).released);
    });
    MESSAGE("server calls per uncontended cycle: exclusive " << exclusive << ", write " << write << ", read " << read);
    CHECK(write <= exclusive);
    CHECK(read <= exclusive);
  }
}
