#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "RedisClient.h"
#include "SentinelTopology.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/sentinel/SentinelOperator.h"

using namespace std::chrono_literals;
using dlock::test::SentinelTopology;
using Steady = std::chrono::steady_clock;

namespace {

std::shared_ptr<dlock::SentinelOperator> sentinelOperator(const std::string& uri) {
  auto backend = std::dynamic_pointer_cast<dlock::SentinelOperator>(dlock::connect(uri));
  REQUIRE(backend.get() != nullptr);
  return backend;
}

std::string portText(int port) { return "127.0.0.1:" + std::to_string(port); }

}  // namespace

TEST_SUITE("SentinelOperator") {
  TEST_CASE("finds the master through the sentinels; lock, extend, inspect and unlock go there") {
    SentinelTopology set;
    auto backend = sentinelOperator(set.uri());
    CHECK(backend->masterAddress().empty());  // nothing contacted before the first call

    const auto taken = backend->lock("k", "token-1", 5000ms);
    REQUIRE(taken.acquired);
    CHECK(taken.fencingToken == 1);
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
    CHECK(backend->inspect("k").fencingToken == 1);
    CHECK(backend->raiseFence("k", 10) == 10);
    CHECK_FALSE(backend->unlock("k", "token-2").released);
    CHECK(backend->unlock("k", "token-1").released);
    CHECK(master.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(backend->lock("k", "token-3", 5000ms).fencingToken == 11);
    CHECK(backend->masterSwitches() == 0);
  }
}
