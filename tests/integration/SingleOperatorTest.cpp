#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

TEST_SUITE("SingleOperator") {
  TEST_CASE("lock, unlock, extend and inspect against a real server") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    const auto taken = backend->lock("k", "token-1", 5000ms);
    REQUIRE(taken.acquired);
    CHECK(taken.fencingToken == 1);
    CHECK(client.ok({"GET", "dlock:{k}"}).str == "token-1");
    const auto pttl = client.ok({"PTTL", "dlock:{k}"}).integer;
    CHECK(pttl > 0);
    CHECK(pttl <= 5000);

    const auto busy = backend->lock("k", "token-2", 5000ms);
    CHECK_FALSE(busy.acquired);
    CHECK(busy.holderTtl > 0ms);
    CHECK(busy.holderTtl <= 5000ms);

    CHECK_FALSE(backend->extend("k", "token-2", 60000ms));
    CHECK(backend->extend("k", "token-1", 60000ms));
    CHECK(client.ok({"PTTL", "dlock:{k}"}).integer > 5000);
    const auto info = backend->inspect("k");
    CHECK(info.held);
    CHECK(info.fencingToken == 1);

    CHECK_FALSE(backend->unlock("k", "token-2").released);
    CHECK(backend->unlock("k", "token-1").released);
    CHECK(client.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(backend->lock("k", "token-3", 5000ms).fencingToken == 2);
  }
}
