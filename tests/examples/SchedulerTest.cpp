// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <optional>
#include <string>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;

namespace {

const std::string kScheduler = DLOCK_EXAMPLE_SCHEDULER;
constexpr auto kLease = 1000ms;

// The next "leading ..." line of an instance: its term.
std::optional<std::uint64_t> nextTerm(ChildProcess& instance, std::chrono::milliseconds budget = 30s) {
  const auto give = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < give) {
    const auto line = instance.readLine(std::chrono::ceil<std::chrono::milliseconds>(give - std::chrono::steady_clock::now()));
    if (!line) return std::nullopt;
    const auto at = line->find(" term=");
    if (line->rfind("leading ", 0) == 0 && at != std::string::npos) return std::stoull(line->substr(at + 6));
  }
  return std::nullopt;
}

}  // namespace

TEST_SUITE("scheduler example") {
  TEST_CASE("two instances of four workers: one worker runs the scheduler, and it moves when its instance is killed") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const auto argv = [&](const std::string& name) {
      return std::vector<std::string>{kScheduler, "--uri", server.uri(), "--instance", name, "--lease-ms",
                                      std::to_string(kLease.count())};
    };
    ChildProcess first(argv("a"));
    const auto firstTerm = nextTerm(first);
    REQUIRE(firstTerm.has_value());
    ChildProcess second(argv("b"));
    // The seven others wait in line behind the leader.
    REQUIRE(eventually([&] { return client.ok({"LLEN", "dlock:{election:scheduler}:fair:queue"}).integer == 7; }));
    REQUIRE(eventually([&] { return client.ok({"GET", "scheduler:term"}).str == std::to_string(*firstTerm); }));
    first.signal(SIGKILL);  // the instance and, with it, its workers
    const auto killedAt = std::chrono::steady_clock::now();
    (void)first.wait();
    const auto secondTerm = nextTerm(second);
    const auto moved = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killedAt).count();
    REQUIRE(secondTerm.has_value());
    CHECK(*secondTerm > *firstTerm);
    // Within the dead term's lease plus a round trip; twice the lease as the budget of a busy machine.
    CHECK(moved < static_cast<double>(2 * kLease.count()));
    MESSAGE("the scheduler moved ", moved, " ms after its instance was killed (lease ", kLease.count(), " ms)");
    REQUIRE(eventually([&] { return client.ok({"GET", "scheduler:term"}).str == std::to_string(*secondTerm); }));
  }
}
