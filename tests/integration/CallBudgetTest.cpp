// SPDX-License-Identifier: Apache-2.0
// The Redis layer inside a timed wait (CallBudget.h): a call gets at most the budget the wait has
// left — connect, reply and pool waits, retries — whatever the server does (stopped, refusing,
// slow); a wait with budget left is never answered from the pool's memory of a failed connect;
// and a reconnect is reported only once the server has answered.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "redis/src/ConnectionPool.h"
#include "LinkProxy.h"
#include "LogCapture.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/detail/CallBudget.h"

using namespace std::chrono_literals;
using dlock::detail::CallBudget;
using dlock::test::LinkProxy;
using dlock::test::RedisProcess;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kBudget = 200ms;
// What a call may take beyond its budget: its cleanup (closing the timed-out connection on the
// server) gets CallBudget's last-attempt floor per step, plus scheduling on a busy machine.
constexpr auto kOverrun = 100ms;
constexpr int kRuns = 7;

// The state letter in /proc/<pid>/stat: 'T' once SIGSTOP took effect.
char processState(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

void pauseAndWait(RedisProcess& server) {
  server.pause();
  REQUIRE(dlock::test::eventually([&] { return processState(server.pid()) == 'T'; }));
}

// kRuns acquires, each inside a budget of kBudget: each must fail with ConnectionError. Returns
// how long each took, sorted.
std::vector<std::chrono::milliseconds> timedCalls(dlock::IOperator& backend) {
  std::vector<std::chrono::milliseconds> took;
  for (int run = 0; run < kRuns; ++run) {
    const auto start = Clock::now();
    {
      CallBudget scope(start + kBudget);
      CHECK_THROWS_AS((void)backend.lock("k", "token-" + std::to_string(run), 30s), dlock::ConnectionError);
    }
    took.push_back(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
  }
  std::sort(took.begin(), took.end());
  return took;
}

// A pool of one server whose reconnect back-off is `backoff`, every step.
std::unique_ptr<dlock::detail::ConnectionPool> poolWithBackoff(const RedisProcess& server,
                                                               std::chrono::milliseconds backoff) {
  dlock::ConnectionOptions where;
  where.host = server.host();
  where.port = server.port();
  dlock::PoolOptions options;
  options.reconnectBackoff = backoff;
  options.maxReconnectBackoff = backoff;
  return std::make_unique<dlock::detail::ConnectionPool>(where, options);
}

// Whether a connection borrowed inside a budget ending at `deadline` answers PING.
bool answersWithin(dlock::detail::ConnectionPool& pool, Clock::time_point deadline) {
  CallBudget scope(deadline);
  try {
    auto connection = pool.borrow();
    return connection->command({"PING"})->type == REDIS_REPLY_STATUS;
  } catch (const dlock::ConnectionError& error) {
    MESSAGE("answered: " << std::string(error.what()));
    return false;
  }
}

void checkWithinBudget(const std::string& server, const std::vector<std::chrono::milliseconds>& took) {
  MESSAGE(server << ": " << kRuns << " calls in a " << kBudget.count() << " ms budget took p50 "
                 << took[took.size() / 2].count() << " ms, max " << took.back().count() << " ms");
  CHECK(took.back() < kBudget + kOverrun);
}

}  // namespace

TEST_SUITE("CallBudget") {
  TEST_CASE("a call inside a budget returns by its deadline from a stopped server, not after command_timeout") {
    RedisProcess server;
    const auto backend = dlock::connect(server.uri() + "?command_timeout=5s&connect_timeout=5s");
    REQUIRE(backend->lock("warm", "token-w", 30s).acquired);  // a pooled connection, idle
    pauseAndWait(server);
    checkWithinBudget("stopped", timedCalls(*backend));
    server.resume();
  }

  TEST_CASE("a call inside a budget returns by its deadline from a slow link and from a refusing port") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    const auto slow = dlock::connect(proxy.uri() + "?command_timeout=5s&connect_timeout=5s");
    REQUIRE(slow->lock("warm", "token-w", 30s).acquired);
    proxy.delay(2s);
    checkWithinBudget("slow", timedCalls(*slow));
    proxy.pass();

    const auto refusing = dlock::connect(server.uri() + "?command_timeout=5s&connect_timeout=5s");
    REQUIRE(refusing->lock("warm-2", "token-r", 30s).acquired);
    server.kill();  // nothing listens on its port now
    checkWithinBudget("refusing", timedCalls(*refusing));
  }

  TEST_CASE("a call with budget left during the pool's reconnect back-off connects once the server is back") {
    RedisProcess server;
    const auto pool = poolWithBackoff(server, 2s);  // the back-off ends well after the server is back
    server.kill();
    CHECK_THROWS_AS((void)pool->borrow(), dlock::ConnectionError);  // the back-off starts

    // A caller without a budget is answered from memory: the herd stays off the server.
    CHECK_THROWS_WITH_AS((void)pool->borrow(), doctest::Contains("retrying after a back-off"), dlock::ConnectionError);

    // Started during the outage: it waits the back-off out and really connects.
    std::thread restart([&] { server.restart(); });
    const auto start = Clock::now();
    const bool answered = answersWithin(*pool, start + 2800ms);
    restart.join();
    CHECK(answered);
    CHECK(Clock::now() - start < 2800ms + kOverrun);
  }

  TEST_CASE("a call whose budget ends before the pool's back-off makes one real attempt at its deadline") {
    RedisProcess server;
    const auto pool = poolWithBackoff(server, 10s);
    server.kill();
    CHECK_THROWS_AS((void)pool->borrow(), dlock::ConnectionError);
    server.restart();  // back, while the pool's back-off has 10 s to run

    const auto start = Clock::now();
    const bool answered = answersWithin(*pool, start + 300ms);
    const auto took = Clock::now() - start;
    CHECK(answered);
    CHECK(took >= 300ms);  // it waited for its deadline before connecting: no herd before it
    CHECK(took < 300ms + kOverrun);
  }

  TEST_CASE("no 'reconnected' is logged while a stopped server answers nothing: the pool's connections") {
    RedisProcess server;
    dlock::test::LogCapture log(spdlog::level::warn);
    const auto backend = dlock::connect(server.uri() + "?command_timeout=200ms&connect_timeout=200ms");
    REQUIRE(backend->lock("warm", "token-w", 30s).acquired);
    pauseAndWait(server);
    for (int call = 0; call < 3; ++call) {
      CHECK_THROWS_AS((void)backend->lock("k", "token-" + std::to_string(call), 30s), dlock::ConnectionError);
    }
    CHECK(log.text().find("reconnected") == std::string::npos);
    server.resume();
    // (A timed-out acquire of "k" may run now: no cancel follows a bare IOperator call.)
    CHECK(dlock::test::recovers([&] { return backend->lock("other", "token-9", 30s).acquired; }));
    CHECK(log.text().find("reconnected") != std::string::npos);  // said once it answers
  }

  TEST_CASE("no 'reconnected' is logged while a stopped server answers nothing: the release subscriber") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());
    dlock::test::LogCapture log(spdlog::level::warn);
    const auto backend = dlock::connect(proxy.uri() + "?command_timeout=200ms&connect_timeout=200ms");
    const auto watch = backend->watch("k");  // the subscriber is connected and subscribed
    pauseAndWait(server);
    const auto accepted = proxy.acceptedConnections();
    proxy.resetAll();  // its connection drops; it connects again, to a server that answers nothing
    // A second attempt: the first one is over.
    REQUIRE(dlock::test::eventually([&] { return proxy.acceptedConnections() >= accepted + 2; }));
    CHECK(log.text().find("reconnected") == std::string::npos);
    server.resume();
    CHECK(dlock::test::eventually([&] { return log.text().find("reconnected") != std::string::npos; }));
  }
}
