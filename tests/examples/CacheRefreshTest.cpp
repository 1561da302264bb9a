// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <chrono>
#include <string>

#include "ExampleProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::Finished;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::resultField;
using dlock::test::run;

namespace {

const std::string kCacheRefresh = DLOCK_EXAMPLE_CACHE_REFRESH;

long long unixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TEST_SUITE("cache refresh example") {
  TEST_CASE("one of twelve concurrent requests rebuilds the entry and the others serve it stale at once") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const Finished finished =
        run({kCacheRefresh, "--uri", server.uri(), "--requests", "12", "--rebuild-ms", "400", "--name", "prices"});
    CHECK_MESSAGE(finished.exitCode == 0, finished.output);
    CHECK_MESSAGE(finished.output.find("RESULT ok ") != std::string::npos, finished.output);
    CHECK(resultField(finished.output, "rebuilds") == 1);
    CHECK(resultField(finished.output, "stale") + resultField(finished.output, "fresh") == 11);
    CHECK(resultField(finished.output, "no_value") == 0);
    CHECK(resultField(finished.output, "waited") == 0);

    CHECK(client.ok({"HGET", "cache:prices", "rebuilds"}).str == "1");
    CHECK(client.ok({"HGET", "cache:prices", "version"}).str == "2");
    CHECK(client.ok({"HGET", "cache:prices", "value"}).str == "prices v2");
    CHECK(std::stoll(client.ok({"HGET", "cache:prices", "fresh_until"}).str) > unixMillis());
    CHECK(client.ok({"EXISTS", "dlock:{rebuild:cache:prices}"}).integer == 0);
  }

  TEST_CASE("while another process holds the rebuild lock, every request serves stale and the check fails") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(30s).build();
    REQUIRE(lock->tryLock("rebuild:cache:daily-report"));

    const auto started = std::chrono::steady_clock::now();
    const Finished finished = run({kCacheRefresh, "--uri", server.uri(), "--requests", "4", "--rebuild-ms", "400"});
    const auto took = std::chrono::steady_clock::now() - started;
    CHECK(finished.exitCode == 1);
    CHECK_MESSAGE(finished.output.find("RESULT FAILED ") != std::string::npos, finished.output);
    CHECK(resultField(finished.output, "rebuilds") == 0);
    CHECK(resultField(finished.output, "stale") == 4);
    CHECK(resultField(finished.output, "no_value") == 0);
    CHECK(client.ok({"HGET", "cache:daily-report", "version"}).str == "1");
    CHECK(client.ok({"HGET", "cache:daily-report", "value"}).str == "daily-report v1");
    // Nobody waited for the 30 s lease; a generous bound, far below it, for slow machines.
    CHECK(took < 10s);
    lock->unlock("rebuild:cache:daily-report");
  }
}
