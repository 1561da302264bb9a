// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include "FencedStore.h"
#include "RedisClient.h"
#include "RedisProcess.h"

using dlock::nemesis::FencedStore;

TEST_SUITE("FencedStore") {
  TEST_CASE("a fenced write is accepted with a token not lower than the last accepted and recorded") {
    dlock::test::RedisProcess server;
    FencedStore store(server.host() + ":" + std::to_string(server.port()));
    CHECK(store.write("k", 5));
    CHECK(store.write("k", 5));
    CHECK_FALSE(store.write("k", 4));
    CHECK(store.write("k", 9));
    CHECK(store.write("other", 1));
    const auto snapshot = store.snapshot({"k", "other", "never"});
    CHECK(snapshot.at("k").acceptedTokens == std::vector<std::uint64_t>{5, 5, 9});
    CHECK(snapshot.at("k").acceptedCount == 3);
    CHECK(snapshot.at("k").lastToken == 9);
    CHECK(snapshot.at("other").acceptedTokens == std::vector<std::uint64_t>{1});
    CHECK(snapshot.at("never").acceptedTokens.empty());
    CHECK(snapshot.at("never").acceptedCount == 0);
  }

  TEST_CASE("the unfenced counter reads 0 until set and keeps the last value set") {
    dlock::test::RedisProcess server;
    FencedStore store(server.host() + ":" + std::to_string(server.port()));
    CHECK(store.get("k") == 0);
    store.set("k", 41);
    store.set("k", 42);
    CHECK(store.get("k") == 42);
    CHECK(store.snapshot({"k"}).at("k").counter == 42);
  }

  TEST_CASE("the store reconnects after its server closed the connection") {
    dlock::test::RedisProcess server;
    FencedStore store(server.host() + ":" + std::to_string(server.port()));
    store.set("k", 1);
    dlock::test::RedisClient admin(server.host(), server.port());
    (void)admin.ok({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    // The first command after the kill finds the connection closed; the next one reconnects.
    try {
      (void)store.get("k");
    } catch (const dlock::nemesis::StoreError&) {
    }
    CHECK(store.get("k") == 1);
  }

  TEST_CASE("an unreachable store is a StoreError") {
    FencedStore store("127.0.0.1:" + std::to_string(dlock::test::freeLoopbackPort()), std::chrono::milliseconds(500));
    CHECK_THROWS_AS((void)store.get("k"), dlock::nemesis::StoreError);
  }
}
