// SPDX-License-Identifier: Apache-2.0
// await releases the key as the lock's own release does (IConditionOperator.h): a process blocked
// in lock() on an exclusive key, registered for the key's next wake-up, is woken by the await's
// release, not by its own recheck. Found by the bounded buffer on the default lock, where each
// await that freed the key for a waiting producer left it asleep until NotifyWait's 1 s recheck.
#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

TEST_SUITE("AwaitWakesWaiter") {
  TEST_CASE("a lock() waiter on an exclusive key is woken by await's release, not by its recheck") {
    dlock::test::RedisProcess server;
    dlock::test::RedisClient client(server.host(), server.port());
    const std::string key = "dlock-test:await-wakes:" + std::to_string(::getpid());
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    // The waiter's recheck (NotifyWait's, and DefaultAttempt's every 10 s) is far beyond the
    // budget below: only the release's wake-up message can let it in within it.
    auto waiting =
        dlock::LockBuilder().backend(dlock::connect(server.uri())).waitStrategy(std::make_shared<dlock::NotifyWait>(60s)).build();
    auto condition = holder->newCondition(key, "ready");
    auto signalling = waiting->newCondition(key, "ready");

    holder->lock(key);
    dlock::CancelSource stop;
    std::atomic<bool> got{false};
    Steady::time_point gotAt;
    std::thread waiter([&] {
      try {
        waiting->lock(key, stop.token());
        gotAt = Steady::now();
        got = true;
        signalling.signal();
        waiting->unlock(key);
      } catch (const dlock::InterruptedError&) {
      }
    });
    REQUIRE(dlock::test::eventually([&] { return dlock::test::waiterRegistered(client, key); }));
    const Steady::time_point awaited = Steady::now();
    // The waiter takes the key the await gave up, signals and releases: the await returns.
    const bool signalled = condition.awaitFor(5s);
    stop.requestCancel();
    waiter.join();
    holder->unlock(key);
    CHECK(got.load());
    CHECK(signalled);
    if (got.load()) {
      MESSAGE("the waiter held the key "
              << std::chrono::duration<double, std::milli>(gotAt - awaited).count() << " ms after the await began");
    }
  }
}
