// SPDX-License-Identifier: Apache-2.0
// The watchdog's warning when a real server goes away under a held lease: it names the lock and
// the connection error that cut the renewal off, and it is given once for the whole outage, not
// at every retry (a restart had logged it six times in 1.6 s, with no cause).
#include <doctest/doctest.h>

#include <string>

#include "LogCapture.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisProcess;

namespace {

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

}  // namespace

TEST_SUITE("RenewalWarning") {
  TEST_CASE("renewals cut off by a dead server warn once, naming the lock and the connection error") {
    RedisProcess server;
    auto lock = dlock::LockBuilder()
                    .backend(dlock::connect(server.uri() + "?connect_timeout=200ms&command_timeout=200ms"))
                    .watchdogLease(3s)  // renewed every second; retried at a quarter of what is left
                    .name("payments")
                    .build();
    dlock::test::LogCapture log(spdlog::level::warn);
    REQUIRE(lock->tryLock("k"));
    server.kill();
    // The event: the lease ends unrenewed at its local deadline (3 s), after several failed tries.
    REQUIRE(dlock::test::eventually([&] { return lock->stats().lostLeases == 1; }, 3s * 10));
    CHECK(lock->stats().renewalFailures >= 2);
    const std::string text = log.text();
    const std::string warning = "dlock: lock 'payments': renewing 1 of 1 lease(s) on ";
    CHECK_MESSAGE(occurrences(text, warning) == 1, text);  // within kRenewalWarningInterval: once
    const auto at = text.find(warning);
    REQUIRE_MESSAGE(at != std::string::npos, text);
    const std::string line = text.substr(at, text.find('\n', at) - at);
    const auto failed = line.find(" failed: ");
    REQUIRE_MESSAGE(failed != std::string::npos, line);
    const std::string cause = line.substr(failed + 9, line.find("; each is lost") - failed - 9);
    CHECK_MESSAGE(cause.rfind("dlock: ", 0) == 0, cause);  // the ConnectionError's own message
    CHECK_MESSAGE(cause.find(std::to_string(server.port())) != std::string::npos, cause);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
  }
}
