// The release subscriber on a real server: its keep-alive, and what its waiters hear around a
// lost connection.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "LogCapture.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::LogCapture;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using Steady = std::chrono::steady_clock;

namespace {

// Polls `condition` every 10 ms; false when `budget` passed first.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (!condition()) {
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// Subscribers of `channel` on the server (PUBSUB NUMSUB).
long long subscribers(RedisClient& client, const std::string& channel) {
  return client.ok({"PUBSUB", "NUMSUB", channel}).elements.at(1).integer;
}

}  // namespace

TEST_SUITE("Subscriber") {
  TEST_CASE("an idle subscriber answers its PINGs without reconnecting") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LogCapture log(spdlog::level::warn);
    dlock::SingleOptions options;
    options.connection.host = server.host();
    options.connection.port = server.port();
    dlock::SingleOperator backend(options);
    const std::string channel = "dlock:{k}:released";

    // Watched once, then by nobody: the channel lingers a while, then the subscriber drops it
    // and keeps its connection with no channel at all.
    (void)backend.watch("k");
    REQUIRE(subscribers(admin, channel) == 1);
    REQUIRE(eventually([&] { return subscribers(admin, channel) == 0; }, 30s));  // the linger is 5 s

    // It PINGs every second when idle; a PONG it does not recognise costs a reconnect each time.
    const long long before = admin.commandCalls()["ping"];
    REQUIRE(eventually([&] { return admin.commandCalls()["ping"] >= before + 3; }, 30s));
    CHECK(backend.reconnects() == 0);
    CHECK(log.text().find("release subscriber") == std::string::npos);
  }
}
