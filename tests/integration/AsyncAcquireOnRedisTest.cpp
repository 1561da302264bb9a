// SPDX-License-Identifier: Apache-2.0
// acquireAsync (dlock/async.h) against a real redis-server: pending acquires woken by release
// messages, many of them on a constant number of threads, cancels and close() leaving no key.
#include <doctest/doctest.h>

#include <future>
#include <string>
#include <vector>

#include "AsyncScenarios.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/LockError.h"
#include "dlock/async.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::AcquireOptions;
using dlock::Lease;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

AcquireOptions waitingAtMost(std::chrono::milliseconds wait) {
  AcquireOptions options;
  options.waitTime = wait;
  return options;
}

// The dlock keys holding a lease on the server (fences and records aside).
long long heldKeys(RedisClient& client, int keys) {
  long long held = 0;
  for (int k = 0; k < keys; ++k) held += client.ok({"EXISTS", "dlock:{async:" + std::to_string(k) + "}"}).integer;
  return held;
}

}  // namespace

TEST_SUITE("AsyncAcquireOnRedis") {
  TEST_CASE("a pending acquire is woken by the holder's release from another lock") {
    RedisProcess server;
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    CHECK(pending.wait_for(0ms) == std::future_status::timeout);
    held.release();
    Lease lease = pending.get();
    REQUIRE(lease);
    CHECK(lease.isHeld());
  }

  TEST_CASE("a wait that runs out completes with an empty lease, as the sync acquire returns") {
    RedisProcess server;
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    Lease held = lock->acquire("job");
    CHECK_FALSE(lock->acquire("job", waitingAtMost(50ms)));
    CHECK_FALSE(lock->acquireAsync("job", waitingAtMost(50ms)).get());
    CHECK(held.isHeld());
  }

  TEST_CASE("close() completes pending acquires with InterruptedError, leaving no key behind") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    Lease held = holder->acquire("async:0");
    std::vector<std::future<Lease>> pending;
    for (int i = 0; i < 100; ++i) pending.push_back(lock->acquireAsync("async:0"));
    lock->close();
    for (auto& future : pending) CHECK_THROWS_AS(future.get(), dlock::InterruptedError);
    held.release();
    CHECK(heldKeys(client, 1) == 0);
  }

  TEST_CASE("2000 pending acquires over 100 keys: constant threads, each completes once, cancelled ones hold nothing") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    dlock::test::checkManyPendingAcquires(*lock, *holder, 2000, 100, 120s);
    CHECK(heldKeys(client, 100) == 0);
  }
}

TEST_SUITE("AsyncAcquireFairOnRedis") {
  // An async waiter holds no place in the fair queue: a release with nobody queued publishes
  // nothing, so it learns of the free key on its key's backstop retry (within a second).
  TEST_CASE("a fair lock's pending async acquire gets the key once the holder releases") {
    RedisProcess server;
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).fair().build();
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).fair().build();
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    CHECK(pending.wait_for(0ms) == std::future_status::timeout);
    held.release();
    CHECK(pending.get());
  }
}
