// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;

TEST_SUITE("MemoryOperator") {
  TEST_CASE("a lease is exclusive until its TTL and reports the holder's remaining time") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    const auto first = backend.lock("k", "t1", 1000ms);
    CHECK(first.acquired);
    CHECK(first.fencingToken == 1);
    clock->advance(400ms);
    const auto busy = backend.lock("k", "t2", 1000ms);
    CHECK_FALSE(busy.acquired);
    CHECK(busy.holderTtl == 600ms);
    clock->advance(600ms);
    const auto second = backend.lock("k", "t2", 1000ms);
    CHECK(second.acquired);
    CHECK(second.fencingToken == 2);
  }

  TEST_CASE("an acquire by the token that holds the key succeeds again with its fencing token and expiry") {
    // As the Redis acquire script: the retry of an acquire whose reply was lost finds its own token.
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    REQUIRE(backend.lock("k", "mine", 1000ms).fencingToken == 1);
    clock->advance(400ms);
    const auto again = backend.lock("k", "mine", 5000ms);
    CHECK(again.acquired);
    CHECK(again.fencingToken == 1);                // not a new acquisition
    CHECK(backend.inspect("k").fencingToken == 1);
    CHECK(backend.inspect("k").remaining == 600ms);  // the lease keeps its expiry
    CHECK_FALSE(backend.lock("k", "theirs", 1000ms).acquired);
    clock->advance(600ms);
    CHECK(backend.lock("k", "theirs", 1000ms).fencingToken == 2);
  }

  TEST_CASE("unlock and extend check the token") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    REQUIRE(backend.lock("k", "mine", 1000ms).acquired);
    CHECK_FALSE(backend.unlock("k", "theirs").released);
    CHECK_FALSE(backend.extend("k", "theirs", 5000ms));
    CHECK(backend.extend("k", "mine", 5000ms));
    clock->advance(4000ms);
    CHECK(backend.inspect("k").held);
    const auto first = backend.unlock("k", "mine");
    CHECK(first.released);
    CHECK_FALSE(first.releasedEarlier);
    const auto again = backend.unlock("k", "mine");  // a retry: answered from the release's record
    CHECK(again.released);
    CHECK(again.releasedEarlier);
    CHECK_FALSE(backend.unlock("k", "theirs").released);
    CHECK_FALSE(backend.unlock("never", "mine").released);
  }

  TEST_CASE("a release's record lasts as long as its lease would have, and a restart forgets it") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    REQUIRE(backend.lock("k", "mine", 1000ms).acquired);
    clock->advance(400ms);
    REQUIRE(backend.unlock("k", "mine").released);
    clock->advance(599ms);
    CHECK(backend.unlock("k", "mine").releasedEarlier);
    clock->advance(1ms);
    CHECK_FALSE(backend.unlock("k", "mine").released);  // the lease would have ended: no record
    REQUIRE(backend.lock("k", "mine", 1000ms).acquired);
    REQUIRE(backend.unlock("k", "mine").released);
    backend.forgetLeases();
    CHECK_FALSE(backend.unlock("k", "mine").released);
  }

  TEST_CASE("a key keeps the records of its last four releases, and an older one's retry reports the loss") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    const std::vector<std::string> tokens = {"t0", "t1", "t2", "t3", "t4"};
    for (const auto& token : tokens) {
      REQUIRE(backend.lock("k", token, 1000ms).acquired);
      REQUIRE(backend.unlock("k", token).released);
    }
    CHECK_FALSE(backend.unlock("k", "t0").released);  // forgotten: a false alarm, never a false release
    for (std::size_t i = 1; i < tokens.size(); ++i) CHECK(backend.unlock("k", tokens[i]).releasedEarlier);
    CHECK_FALSE(backend.unlock("other", "t4").released);  // records are per key
  }

  TEST_CASE("a token that acquires again after its release: the old release's record is no evidence for the new hold") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    REQUIRE(backend.lock("k", "a", 5000ms).acquired);
    REQUIRE(backend.unlock("k", "a").released);  // Redlock's rollback of a partial acquire: a 5 s record
    REQUIRE(backend.lock("k", "a", 1000ms).acquired);  // the retry, same token
    clock->advance(1000ms);  // the new hold's lease ends ...
    REQUIRE(backend.lock("k", "b", 1000ms).acquired);  // ... and another takes the key
    const auto result = backend.unlock("k", "a");
    CHECK_FALSE(result.released);
    CHECK_FALSE(result.releasedEarlier);
  }

  TEST_CASE("a token that only tries the key again, finding it busy: its old release's record goes too") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    REQUIRE(backend.lock("k", "a", 5000ms).acquired);
    REQUIRE(backend.unlock("k", "a").released);
    REQUIRE(backend.lock("k", "b", 5000ms).acquired);
    REQUIRE_FALSE(backend.lock("k", "a", 5000ms).acquired);
    const auto result = backend.unlock("k", "a");
    CHECK_FALSE(result.released);
    CHECK_FALSE(result.releasedEarlier);
  }

  TEST_CASE("an expired lease can be neither extended nor released") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    dlock::MemoryOperator backend(clock);
    REQUIRE(backend.lock("k", "mine", 1000ms).acquired);
    clock->advance(1000ms);
    CHECK_FALSE(backend.extend("k", "mine", 1000ms));
    CHECK_FALSE(backend.unlock("k", "mine").released);
  }

  TEST_CASE("extendAll answers per lease in one call") {
    dlock::MemoryOperator backend;
    REQUIRE(backend.lock("a", "ta", 1000ms).acquired);
    REQUIRE(backend.lock("b", "tb", 1000ms).acquired);
    const auto before = backend.calls();
    const auto extended = backend.extendAll({{"a", "ta"}, {"b", "wrong"}, {"c", "tc"}}, 2000ms);
    CHECK(dlock::test::extendedFlags(extended) == std::vector<bool>{true, false, false});
    CHECK(backend.calls() == before + 1);
  }

  TEST_CASE("inspect reports the lease and the last fencing token") {
    dlock::MemoryOperator backend;
    CHECK_FALSE(backend.inspect("k").held);
    CHECK(backend.inspect("k").fencingToken == 0);
    REQUIRE(backend.lock("k", "t", 1000ms).acquired);
    const auto info = backend.inspect("k");
    CHECK(info.held);
    CHECK(info.fencingToken == 1);
    CHECK(info.remaining <= 1000ms);
    CHECK(info.remaining > 0ms);
  }

  TEST_CASE("failNextCalls throws ConnectionError for exactly that many calls and touches nothing") {
    dlock::MemoryOperator backend;
    backend.failNextCalls(2);
    CHECK_THROWS_AS((void)backend.lock("k", "t", 1000ms), dlock::ConnectionError);
    CHECK_THROWS_AS((void)backend.inspect("k"), dlock::ConnectionError);
    CHECK(backend.size() == 0);
    CHECK(backend.lock("k", "t", 1000ms).acquired);
    CHECK(backend.calls() == 3);
  }

  TEST_CASE("setLatency delays every call") {
    dlock::MemoryOperator backend;
    backend.setLatency(20ms);
    const auto start = std::chrono::steady_clock::now();
    (void)backend.lock("k", "t", 1000ms);
    CHECK(std::chrono::steady_clock::now() - start >= 20ms);
    backend.setLatency(0ms);
  }

  TEST_CASE("a watch sees a release made after it was taken, even before it waits") {
    dlock::MemoryOperator backend;
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    auto watch = backend.watch("k");
    REQUIRE(watch != nullptr);
    CHECK(backend.unlock("k", "t").released);
    CHECK(watch->waitForRelease(0ms));
    CHECK_FALSE(watch->waitForRelease(10ms));  // consumed
  }

  TEST_CASE("a watch wakes its waiter on release, not on other keys") {
    dlock::MemoryOperator backend;
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    REQUIRE(backend.lock("other", "t", 60000ms).acquired);
    auto watch = backend.watch("k");
    CHECK(backend.unlock("other", "t").released);
    CHECK_FALSE(watch->waitForRelease(0ms));  // another key's release is not ours
    std::thread releaser([&] { CHECK(backend.unlock("k", "t").released); });
    const auto start = std::chrono::steady_clock::now();
    CHECK(watch->waitForRelease(10s));
    CHECK(std::chrono::steady_clock::now() - start < 5s);
    releaser.join();
  }
}

TEST_SUITE("MemoryOperator") {
  TEST_CASE("a release wakes one watcher, the longest registered of those not woken yet, which keeps its place") {
    dlock::MemoryOperator backend;
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    CHECK(backend.unlock("k", "t").notified == 0);
    auto first = backend.watch("k");
    auto second = backend.watch("k");
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    const auto result = backend.unlock("k", "t");
    CHECK(result.released);
    CHECK(result.notified == 1);
    CHECK(first->waitForRelease(0ms));
    CHECK_FALSE(second->waitForRelease(0ms));  // not woken: one release, one wake-up
    // `first` woke and waits again (its try lost the key): the next release wakes it again.
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    CHECK(backend.unlock("k", "t").notified == 1);
    CHECK_FALSE(second->waitForRelease(0ms));
    // While `first` has not taken its wake-up, a release goes to `second`.
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    CHECK(backend.unlock("k", "t").notified == 1);
    CHECK(second->waitForRelease(0ms));
    CHECK(first->waitForRelease(0ms));
    first.reset();  // it got the key: the next release wakes `second`
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    CHECK(backend.unlock("k", "t").notified == 1);
    CHECK(second->waitForRelease(0ms));
    second.reset();
    REQUIRE(backend.lock("k", "t", 60000ms).acquired);
    CHECK(backend.unlock("k", "t").notified == 0);  // the watches are gone
  }

  TEST_CASE("raiseFence raises the counter but never lowers it") {
    dlock::MemoryOperator backend;
    CHECK(backend.raiseFence("k", 10) == 10);
    CHECK(backend.raiseFence("k", 5) == 10);
    CHECK(backend.lock("k", "t", 1000ms).fencingToken == 11);
  }
}
