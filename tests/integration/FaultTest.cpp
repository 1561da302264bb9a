// SPDX-License-Identifier: Apache-2.0
// Faults on a real server: connections killed mid-operation, a paused or sleeping server, error
// replies (OOM, LOADING, NOPERM). Each gives a typed error, nothing hangs past its timeout, no
// lock key is left without a TTL, and the client recovers when the fault ends.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "LinkProxy.h"
#include "LogCapture.h"
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
using dlock::test::checkEveryLockKeyHasTtl;
using dlock::test::eventually;
using dlock::test::recovers;
using Steady = std::chrono::steady_clock;

namespace {

const std::string kShortTimeouts = "?connect_timeout=300ms&command_timeout=300ms";

// One lock/unlock cycle of `key`; false when the key could not be had within a second.
bool cycle(dlock::ILock& lock, const std::string& key) {
  if (!lock.tryLock(key, 1s)) return false;
  lock.unlock(key);
  return true;
}

}  // namespace

TEST_SUITE("Faults") {
  TEST_CASE("connections killed mid-operation give ConnectionError and the client recovers") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).leaseTime(5s).build();
    std::atomic<bool> stop{false};
    std::atomic<int> cycles{0};
    std::atomic<int> connectionErrors{0};
    std::atomic<int> otherErrors{0};
    std::atomic<int> rounds{0};
    std::thread worker([&] {
      for (; !stop; ++rounds) {
        try {
          if (!lock->tryLock("k", 1s)) continue;
          try {
            lock->unlock("k");
          } catch (const dlock::ConnectionError&) {
            ++connectionErrors;
            lock->unlockQuietly("k");  // give up the hold; its lease ends on its own
          }
          ++cycles;
        } catch (const dlock::ConnectionError&) {
          ++connectionErrors;
        } catch (const dlock::LockLostError&) {
          // A lease that ended during the faults (a lost reply counts as released only within it).
          ++cycles;
        } catch (...) {
          ++otherErrors;
        }
      }
    });
    // A kill every 20 ms lands anywhere in an operation; each waits for the worker to have finished
    // a round since the last one, however slowly it runs.
    for (int kill = 0; kill < 30; ++kill) {
      const int round = rounds;
      std::this_thread::sleep_for(20ms);
      if (!eventually([&] { return rounds > round; })) {
        FAIL_CHECK("the worker finished no round within " << dlock::test::kEventBudget.count() << " s");
        break;
      }
      admin.command({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
    }
    stop = true;
    worker.join();
    CHECK(otherErrors == 0);
    CHECK(cycles > 0);
    MESSAGE("cycles " << cycles << ", connection errors " << connectionErrors);
    checkEveryLockKeyHasTtl(admin);
    CHECK(recovers([&] { return cycle(*lock, "after"); }));
    for (int i = 0; i < 20; ++i) CHECK(cycle(*lock, "after"));
  }

  TEST_CASE("a server paused longer than the command timeout: ConnectionError in time, then recovery") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).leaseTime(3s).build();
    REQUIRE(lock->tryLock("warm"));
    lock->unlock("warm");
    // Far longer than the attempt and its clean-up, which wait at most the command timeout each.
    constexpr auto kPause = 6s;
    admin.ok({"CLIENT", "PAUSE", std::to_string(std::chrono::milliseconds(kPause).count()), "ALL"});
    const auto start = Steady::now();
    CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
    CHECK(Steady::now() - start < kPause / 2);  // gave up on its own, long before the pause ended
    CHECK(lock->holdCount("k") == 0);
    // A command sent now is answered once the pause ends, after the queued ones.
    RedisClient(server.host(), server.port(), kPause * 5).ok({"PING"});
    checkEveryLockKeyHasTtl(admin);
    CHECK(recovers([&] { return cycle(*lock, "other"); }));
  }

  TEST_CASE("DEBUG SLEEP on the server: ConnectionError in time, then recovery") {
    RedisProcess server;
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).leaseTime(3s).build();
    // Far longer than the attempt and its clean-up, which wait at most the command timeout each.
    constexpr auto kSleep = 6s;
    std::thread sleeper([&] {
      RedisClient admin(server.host(), server.port(), kSleep * 5);
      admin.command({"DEBUG", "SLEEP", std::to_string(std::chrono::seconds(kSleep).count())});
    });
    const bool asleep = eventually([&] { return dlock::test::inNanosleep(server.pid()); });
    if (asleep) {
      const auto start = Steady::now();
      CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
      CHECK(Steady::now() - start < kSleep / 2);  // gave up on its own, long before the server woke
    }
    sleeper.join();
    REQUIRE_MESSAGE(asleep, "redis-server never went into DEBUG SLEEP");
    RedisClient admin(server.host(), server.port());
    checkEveryLockKeyHasTtl(admin);
    CHECK(recovers([&] { return cycle(*lock, "other"); }));
  }

  TEST_CASE("maxmemory reached: OOM is a BackendError and nothing is held") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(5s).build();
    admin.ok({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    admin.ok({"CONFIG", "SET", "maxmemory", "1"});
    try {
      (void)lock->tryLock("k");
      FAIL("an OOM reply must raise");
    } catch (const dlock::BackendError& error) {
      CHECK(std::string(error.what()).find("OOM") != std::string::npos);
    }
    CHECK(lock->holdCount("k") == 0);
    admin.ok({"CONFIG", "SET", "maxmemory", "0"});
    REQUIRE(lock->tryLock("k"));
    lock->unlock("k");
  }

  TEST_CASE("a fence key of the wrong type: BackendError, and the lock key is not left behind") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    for (const std::string key : {"k", "other"}) admin.ok({"HSET", "dlock:{" + key + "}:fence", "not", "a counter"});
    auto backend = dlock::connect(server.uri());
    // The acquire script fails before it sets the key: a script is not rolled back.
    CHECK_THROWS_WITH_AS((void)backend->lock("k", "token-1", 30000ms), doctest::Contains("WRONGTYPE"),
                         dlock::BackendError);
    CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    // Through a lock (the watchdog's lease): nothing held here or on the server.
    auto lock = dlock::LockBuilder().backend(backend).build();
    CHECK_THROWS_WITH_AS((void)lock->tryLock("other"), doctest::Contains("WRONGTYPE"), dlock::BackendError);
    CHECK(lock->holdCount("other") == 0);
    CHECK(admin.ok({"EXISTS", "dlock:{other}"}).integer == 0);
  }

  TEST_CASE("a server still loading its data: LOADING is a ConnectionError until it is ready") {
    RedisProcess::Options options;
    // Microseconds per key loaded, and serve clients every KiB of loading (the default 2 MB would
    // answer nobody until this small dataset is loaded): a loading window a client can see.
    constexpr int kKeys = 20000;
    constexpr auto kKeyLoadDelay = 100us;
    options.config = {"key-load-delay " + std::to_string(kKeyLoadDelay.count()),
                      "loading-process-events-interval-bytes 1024"};
    RedisProcess server(options);
    {
      RedisClient admin(server.host(), server.port());
      admin.ok({"DEBUG", "POPULATE", std::to_string(kKeys)});
      admin.ok({"SAVE"});
    }
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri() + kShortTimeouts)).leaseTime(5s).build();
    server.kill();
    server.restart();  // answers (LOADING) at once, then loads for a few seconds
    bool sawLoading = false;
    try {
      (void)lock->tryLock("k");
    } catch (const dlock::ConnectionError& error) {
      sawLoading = std::string(error.what()).find("LOADING") != std::string::npos;
    }
    CHECK(sawLoading);
    // Ready when the server says so. Its loading time is at least kKeys x kKeyLoadDelay (2 s) and a
    // busy machine stretches it; the budget is many times that, for a server that never finishes.
    RedisClient admin(server.host(), server.port());
    const auto loadTime = std::chrono::duration_cast<std::chrono::milliseconds>(kKeys * kKeyLoadDelay);
    REQUIRE_MESSAGE(eventually([&] { return dlock::test::infoField(admin, "loading") == "0"; }, loadTime * 30),
                    "the restarted server never finished loading");
    CHECK(recovers([&] { return cycle(*lock, "k"); }));
  }

  TEST_CASE("an ACL user without EVALSHA or PUBLISH gets a BackendError naming the permission") {
    RedisProcess::Options options;
    options.config = {"user noeval on >pw ~* &* +@all -evalsha -eval", "user nopublish on >pw ~* &* +@all -publish"};
    RedisProcess server(options);
    RedisClient admin(server.host(), server.port());
    const std::string address = server.host() + ":" + std::to_string(server.port());
    // connect() asks first, naming what is refused.
    CHECK_THROWS_WITH_AS((void)dlock::connect("redis://noeval:pw@" + address), doctest::Contains("'eval'"),
                         dlock::BackendError);
    CHECK_THROWS_WITH_AS((void)dlock::connect("redis://nopublish:pw@" + address),
                         doctest::Contains("may not run PUBLISH"), dlock::BackendError);

    // Connected lazily (or refused since), the calls meet the refusals themselves.
    auto noEval = dlock::LockBuilder()
                      .backend(dlock::connect("redis://noeval:pw@" + address + "?lazy_connect=true"))
                      .leaseTime(5s)
                      .build();
    try {
      (void)noEval->tryLock("k");
      FAIL("EVALSHA must be refused");
    } catch (const dlock::BackendError& error) {
      CHECK(std::string(error.what()).find("NOPERM") != std::string::npos);
    }

    auto noPublish = dlock::LockBuilder()
                         .backend(dlock::connect("redis://nopublish:pw@" + address + "?lazy_connect=true"))
                         .leaseTime(5s)
                         .build();
    REQUIRE(noPublish->tryLock("k"));
    try {
      noPublish->unlock("k");
      FAIL("the release's PUBLISH must be refused");
    } catch (const dlock::BackendError& error) {
      CHECK(std::string(error.what()).find("can't run this command") != std::string::npos);
    }
    // The refused release changed nothing: still held, with its TTL, by the same hold.
    CHECK(noPublish->holdCount("k") == 1);
    CHECK(admin.ok({"PTTL", "dlock:{k}"}).integer > 0);
    admin.ok({"ACL", "SETUSER", "nopublish", "+publish"});
    noPublish->unlock("k");
    CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
  }

  TEST_CASE("a reconnect is logged only once the server answers, never before the error that says it does not") {
    RedisProcess::Options config;
    config.config = {"requirepass try-pw"};
    RedisProcess server(config);
    server.kill();  // nothing listens on its port: the first connect fails
    // No password in the URI: the server, once reachable, refuses every command (NOAUTH).
    auto backend = dlock::connect(server.uri() + "?lazy_connect=true&connect_timeout=500ms");
    dlock::test::LogCapture log;
    CHECK_THROWS_AS((void)backend->lock("k", "t", 5000ms), dlock::ConnectionError);
    server.restart();
    const auto deadline = std::chrono::steady_clock::now() + dlock::test::kEventBudget;
    bool refused = false;
    while (!refused && std::chrono::steady_clock::now() < deadline) {
      try {
        (void)backend->lock("k", "t", 5000ms);
        FAIL("a lock without the password was granted");
        break;
      } catch (const dlock::BackendError& error) {
        refused = true;
        CHECK(std::string(error.what()).find("NOAUTH") != std::string::npos);
      } catch (const dlock::ConnectionError&) {  // the pool's back-off after the refused connect
        std::this_thread::yield();
      }
    }
    CHECK(refused);
    CHECK_MESSAGE(log.text().find("reconnected") == std::string::npos, log.text());
  }

  TEST_CASE("an unlock whose reply is lost after it ran is retried by the pool and reported released, not lost") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(proxy.uri())).leaseTime(30s).build();
    REQUIRE(lock->tryLock("warm"));  // loads the scripts (a NOSCRIPT would not delete anything)
    lock->unlock("warm");
    REQUIRE(lock->tryLock("k"));  // its connection waits in the pool: the unlock reuses it
    proxy.loseNextReply();
    CHECK_NOTHROW(lock->unlock("k"));  // the pool's retry on a fresh connection finds the key gone
    CHECK(proxy.waitReplyLost(dlock::test::kEventBudget));  // the release ran on the server, its reply was lost
    CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(lock->holdCount("k") == 0);
    CHECK(lock->stats().lostLeases == 0);
  }

  TEST_CASE("an unlock whose reply is lost on a fresh connection fails, and its retry reports released") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(proxy.uri())).leaseTime(30s).build();
    REQUIRE(lock->tryLock("warm"));
    lock->unlock("warm");
    REQUIRE(lock->tryLock("k"));
    proxy.resetAll();       // the pooled connection dies idle: the pool retries on a fresh one ...
    proxy.loseNextReply("EVALSHA");  // ... whose reply is lost (after its handshake), so no try answers
    CHECK_THROWS_AS(lock->unlock("k"), dlock::ConnectionError);
    CHECK(proxy.waitReplyLost(dlock::test::kEventBudget));
    CHECK(lock->holdCount("k") == 1);  // kept for a retry
    CHECK_NOTHROW(lock->unlock("k"));  // the lease is valid: the lost try released it
    CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(lock->stats().lostLeases == 0);
  }
}
