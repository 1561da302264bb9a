// SPDX-License-Identifier: Apache-2.0
// Releases whose outcome was in doubt (a connection that died under them, a reply that was lost)
// are decided by what the server holds, never by the lease's local validity: a release that ran
// reports released, a key that was lost and taken by another reports LockLostError.
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "LinkProxy.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::LinkProxy;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

const std::string kShortTimeouts = "?connect_timeout=300ms&command_timeout=300ms";

}  // namespace

TEST_SUITE("ReleaseEvidence") {
  TEST_CASE("a lease lost to a restart without persistence and taken by another: unlock reports LockLostError") {
    RedisProcess server;
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).build();
    auto other = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).build();
    REQUIRE(holder->tryLock("job"));  // its connection waits in the pool: the unlock reuses it

    server.kill();
    server.restart();  // empty: the lease is gone with the data
    REQUIRE(other->tryLock("job"));

    // The pooled connection meets EOF; the retry on a fresh one finds the other owner's token.
    CHECK_THROWS_AS(holder->unlock("job"), dlock::LockLostError);
    CHECK(holder->holdCount("job") == 0);
    CHECK(holder->stats().lostLeases == 1);
    CHECK(other->isHeld("job"));
    RedisClient admin(server.host(), server.port());
    CHECK(admin.ok({"EXISTS", "dlock:{job}"}).integer == 1);  // the other owner's lease untouched
    other->unlock("job");
  }

  TEST_CASE("a lease lost to a restart without persistence, the key free: unlock reports LockLostError") {
    RedisProcess server;
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).build();
    REQUIRE(holder->tryLock("job"));
    server.kill();
    server.restart();
    // Nobody took it, but nothing on the server says our release ran: a false alarm is safer.
    CHECK_THROWS_AS(holder->unlock("job"), dlock::LockLostError);
    CHECK(holder->stats().lostLeases == 1);
  }

  TEST_CASE("a token that acquires again after its release: the old release's record is no evidence for the new hold") {
    // Redlock rolls back a partial acquire by releasing the token on every node, and the lock
    // tries again with the same token; the rollback's record must not answer for the release of
    // the hold that follows (seen in redlock-clock-strobe: an untold loss).
    RedisProcess server;
    const auto holder = dlock::connect(server.uri());
    const auto other = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", "token-a", 30s).acquired);
    REQUIRE(holder->unlock("k", "token-a").released);  // the rollback: a record for token-a
    REQUIRE(holder->lock("k", "token-a", 30s).acquired);  // the retry, same token
    RedisClient admin(server.host(), server.port());
    REQUIRE(admin.ok({"DEL", "dlock:{k}"}).integer == 1);  // the lease lost (a clock jump, a restart)
    REQUIRE(other->lock("k", "token-b", 30s).acquired);
    const dlock::ReleaseResult result = holder->unlock("k", "token-a");
    CHECK_FALSE(result.released);
    CHECK_FALSE(result.releasedEarlier);
    CHECK(other->unlock("k", "token-b").released);
  }

  TEST_CASE("a token that only tries the key again, finding it busy: its old release's record goes too") {
    // Redlock's next try takes a quorum elsewhere; on this node the key is another's, and the
    // rollback's record here must not count for the later hold's release.
    RedisProcess server;
    const auto holder = dlock::connect(server.uri());
    const auto other = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", "token-a", 30s).acquired);
    REQUIRE(holder->unlock("k", "token-a").released);  // the rollback: a record for token-a
    REQUIRE(other->lock("k", "token-b", 30s).acquired);
    REQUIRE_FALSE(holder->lock("k", "token-a", 30s).acquired);  // the retry finds it busy here
    const dlock::ReleaseResult result = holder->unlock("k", "token-a");  // the later hold's release
    CHECK_FALSE(result.released);
    CHECK_FALSE(result.releasedEarlier);
    CHECK(other->unlock("k", "token-b").released);
  }

  TEST_CASE("a release whose reply was lost, then the key taken by another: the retry still reports released") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    auto holder = dlock::LockBuilder().backend(dlock::connect(proxy.uri() + kShortTimeouts)).leaseTime(30s).build();
    auto other = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    REQUIRE(holder->tryLock("warm"));  // loads the scripts
    holder->unlock("warm");
    REQUIRE(holder->tryLock("k"));
    proxy.resetAll();       // the pooled connection dies idle: the pool retries on a fresh one ...
    proxy.loseNextReply("EVALSHA");  // ... whose reply is lost (after its handshake), so no try answers
    CHECK_THROWS_AS(holder->unlock("k"), dlock::ConnectionError);
    CHECK(proxy.waitReplyLost(dlock::test::kEventBudget));
    REQUIRE(other->tryLock("k"));  // the release ran: the key was free for the next owner
    CHECK_NOTHROW(holder->unlock("k"));  // the server kept the evidence of our release
    CHECK(holder->stats().lostLeases == 0);
    CHECK(other->isHeld("k"));
    other->unlock("k");
  }
}
