// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <string>

#include "ExampleProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"

using dlock::test::Finished;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::resultField;
using dlock::test::run;

namespace {

const std::string kConfigReload = DLOCK_EXAMPLE_CONFIG_RELOAD;

}  // namespace

TEST_SUITE("config reload example") {
  TEST_CASE("handlers read the configuration together and never see half a reload") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const Finished finished =
        run({kConfigReload, "--uri", server.uri(), "--readers", "6", "--reloads", "5", "--name", "payments"});
    CHECK_MESSAGE(finished.exitCode == 0, finished.output);
    CHECK_MESSAGE(finished.output.find("RESULT ok ") != std::string::npos, finished.output);
    CHECK(resultField(finished.output, "torn") == 0);
    CHECK(resultField(finished.output, "beside_reload") == 0);
    CHECK(resultField(finished.output, "most_readers") > 1);
    CHECK(resultField(finished.output, "version") == 5);
    CHECK(client.ok({"HGET", "config:payments", "endpoint"}).str == "db@v5");
    CHECK(client.ok({"HGET", "config:payments", "pool"}).str == "32@v5");
    // Every hold released: nothing of the lock is left but what expires on its own.
    for (const auto& reply : client.ok({"KEYS", "dlock:*"}).elements) {
      CHECK(client.ok({"PTTL", reply.str}).integer > 0);
    }
  }

  TEST_CASE("without the lock, handlers see half a reload and the check fails") {
    RedisProcess server;
    const Finished finished = run({kConfigReload, "--uri", server.uri(), "--readers", "6", "--reloads", "20",
                                   "--unlocked", "1"});
    CHECK(finished.exitCode == 1);
    CHECK_MESSAGE(finished.output.find("RESULT FAILED ") != std::string::npos, finished.output);
    CHECK(resultField(finished.output, "beside_reload") > 0);
  }
}
