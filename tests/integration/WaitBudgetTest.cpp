// SPDX-License-Identifier: Apache-2.0
// A timed wait keeps its budget against a server that hangs, refuses or answers slowly: it returns
// within the budget plus the floor of its last attempt and of its inline clean-up
// (CallBudget::kLastAttemptFloor each) and the scheduler's latency; and it never gives up while it
// has budget left, nor on a failure remembered from before it.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "ChildProcess.h"
#include "LinkProxy.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "TimedWait.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::LinkProxy;
using dlock::test::RedisProcess;
using dlock::test::timed;
constexpr auto kAllowance = dlock::test::kWaitAllowance;

namespace {

// A command timeout far above the waits' budgets, so that a wait bounded by it is seen at once.
const std::string kLongCommands = "?connect_timeout=2s&command_timeout=2s";

std::shared_ptr<dlock::ILock> lockOn(const std::string& uri, bool fair,
                                     std::chrono::milliseconds outageTolerance = 30s) {
  return dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(5s).fair(fair).outageTolerance(outageTolerance).build();
}

// What `dlock_test_worker timed-try` printed for `uri`, the name ".slow.test" resolving after
// `resolveMs` (SlowResolve.c preloaded): "took <ms> got <0|1> error <type|none>".
struct TimedTry {
  long long took = -1;
  int got = -1;
  std::string error;
};

TimedTry timedTryResolvingIn(const std::string& uri, long long resolveMs, long long budgetMs) {
  dlock::test::ChildProcess::Options options;
  options.argv = {DLOCK_TEST_WORKER, "timed-try", uri, "k", std::to_string(budgetMs)};
  options.env = {{"LD_PRELOAD", DLOCK_TEST_SLOW_RESOLVE},
                 {"DLOCK_SLOW_RESOLVE_MS", std::to_string(resolveMs)},
                 {"ASAN_OPTIONS", "verify_asan_link_order=0"}};
  dlock::test::ChildProcess worker(options);
  const auto line = worker.readLine(std::chrono::seconds(60));
  REQUIRE(line);
  CHECK(worker.wait() == 0);
  TimedTry result;
  char error[64] = {};
  REQUIRE(std::sscanf(line->c_str(), "took %lld got %d error %63s", &result.took, &result.got, error) == 3);
  result.error = error;
  return result;
}

// Warms the lock's connections, so the wait below meets the fault on a pooled one.
void warm(dlock::ILock& lock) {
  REQUIRE(lock.tryLock("warm"));
  lock.unlock("warm");
}

}  // namespace

TEST_SUITE("WaitBudget") {
  TEST_CASE("tryLock(k, 200ms) against a paused server returns within its budget, default and fair") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      RedisProcess server;
      auto lock = lockOn(server.uri() + kLongCommands, fair);
      warm(*lock);
      server.pause();
      const auto [took, threw] = timed([&] { (void)lock->tryLock("k", 200ms); });
      server.resume();
      MESSAGE("fair=" << fair << ": tryLock(k, 200ms) took " << took.count() << " ms");
      CHECK(threw);  // no answer at all: the backend was unreachable, not the key taken
      CHECK(took >= 200ms);
      CHECK(took <= 200ms + kAllowance);
      CHECK(lock->holdCount("k") == 0);
    }
  }

  TEST_CASE("tryLock(k, 200ms) on Redlock with every node paused returns within its budget") {
    RedisProcess a;
    RedisProcess b;
    RedisProcess c;
    const auto node = [](const RedisProcess& server) { return server.host() + ":" + std::to_string(server.port()); };
    auto lock = lockOn("redlock://" + node(a) + "," + node(b) + "," + node(c) + "?node_timeout=2s&command_timeout=2s", false);
    warm(*lock);
    a.pause();
    b.pause();
    c.pause();
    const auto [took, threw] = timed([&] { (void)lock->tryLock("k", 200ms); });
    a.resume();
    b.resume();
    c.resume();
    MESSAGE("redlock: tryLock(k, 200ms) took " << took.count() << " ms");
    CHECK(threw);
    CHECK(took >= 200ms);
    CHECK(took <= 200ms + kAllowance);
  }

  TEST_CASE("lock() with outageTolerance 1s against a paused server gives up within the tolerance") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      RedisProcess server;
      auto lock = lockOn(server.uri() + "?connect_timeout=300ms&command_timeout=300ms", fair, 1s);
      warm(*lock);
      server.pause();
      const auto [took, threw] = timed([&] { lock->lock("k"); });
      server.resume();
      MESSAGE("fair=" << fair << ": lock(k) with a 1 s tolerance took " << took.count() << " ms");
      CHECK(threw);
      CHECK(took >= 1s);
      CHECK(took <= 1s + kAllowance);
    }
  }

  TEST_CASE("tryLock(k, 1000ms) against a refusing server makes its last attempt at the deadline") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      RedisProcess server;
      auto lock = lockOn(server.uri() + "?lazy_connect=true", fair);
      warm(*lock);
      server.kill();  // the port refuses connections
      const auto [took, threw] = timed([&] { (void)lock->tryLock("k", 1000ms); });
      MESSAGE("fair=" << fair << ": tryLock(k, 1000ms) on a refusing port took " << took.count() << " ms");
      CHECK(threw);
      CHECK(took >= 1000ms);  // not given up while budget was left
      CHECK(took <= 1000ms + kAllowance);
    }
  }

  TEST_CASE("tryLock(k, 2800ms) rides out a restart that ends 1 s in: the key is had once the server is back") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      RedisProcess server;
      auto lock = lockOn(server.uri() + "?lazy_connect=true", fair);
      warm(*lock);
      server.kill();
      std::thread restarter([&] {
        std::this_thread::sleep_for(1s);  // the outage the wait must ride out, not a wait for an event
        server.restart();
      });
      bool got = false;
      const auto [took, threw] = timed([&] { got = lock->tryLock("k", 2800ms); });
      restarter.join();
      MESSAGE("fair=" << fair << ": tryLock(k, 2800ms) across a 1 s outage took " << took.count() << " ms");
      CHECK_FALSE(threw);
      CHECK(got);
      if (got) lock->unlock("k");
    }
  }

  TEST_CASE("tryLock(k, 200ms) against a server 500 ms away returns within its budget, default and fair") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      RedisProcess server;
      LinkProxy proxy(server.host(), server.port());
      auto lock = lockOn(proxy.uri() + kLongCommands, fair);
      warm(*lock);
      proxy.delay(250ms);  // each way: a round trip of 500 ms
      const auto [took, threw] = timed([&] { (void)lock->tryLock("k", 200ms); });
      MESSAGE("fair=" << fair << ": tryLock(k, 200ms) with 500 ms round trips took " << took.count() << " ms");
      CHECK(took >= 200ms);
      CHECK(took <= 200ms + kAllowance);
      proxy.pass();
    }
  }

  TEST_CASE("a host name whose resolution hangs: connect gives up at its connect timeout, tryLock(k, 200ms) at its budget") {
    RedisProcess server;
    const std::string slowHost = "redis://dlock.slow.test:" + std::to_string(server.port());
    // Resolved after 20 ms: the name leads to the server (the check below would pass on any error).
    const TimedTry quick = timedTryResolvingIn(slowHost, 20, 200);
    CHECK(quick.got == 1);
    CHECK(quick.error == "none");
    // Resolved after 8 s (a DNS server that does not answer: resolv.conf's 5 s timeout, twice).
    const TimedTry eager = timedTryResolvingIn(slowHost + "?connect_timeout=500ms&command_timeout=2s", 8000, 200);
    MESSAGE("connect with connect_timeout=500ms took " << eager.took << " ms");
    CHECK(eager.error == "ConnectionError");
    CHECK(eager.took >= 500);
    CHECK(eager.took <= 500 + kAllowance.count());
    const TimedTry lazy =
        timedTryResolvingIn(slowHost + "?connect_timeout=2s&command_timeout=2s&lazy_connect=true", 8000, 200);
    MESSAGE("tryLock(k, 200ms) with lazy_connect took " << lazy.took << " ms");
    CHECK(lazy.error == "ConnectionError");
    CHECK(lazy.took >= 200);
    CHECK(lazy.took <= 200 + kAllowance.count());
  }
}
