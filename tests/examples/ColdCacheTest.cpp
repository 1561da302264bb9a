// SPDX-License-Identifier: Apache-2.0
// dlock_example_cold_cache: requests that find no value wait on a Condition for the one rebuild.
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

TEST_SUITE("cold cache example") {
  TEST_CASE("one of twelve requests on a cold entry rebuilds it, the others wait on a Condition and serve its value") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const Finished finished = run({DLOCK_EXAMPLE_COLD_CACHE, "--uri", server.uri(), "--requests", "12", "--rebuild-ms",
                                   "300", "--name", "prices"});
    CHECK_MESSAGE(finished.exitCode == 0, finished.output);
    CHECK_MESSAGE(finished.output.find("RESULT ok ") != std::string::npos, finished.output);
    CHECK(resultField(finished.output, "rebuilds") == 1);
    CHECK(resultField(finished.output, "waited") + resultField(finished.output, "fresh") == 11);
    CHECK(resultField(finished.output, "wrong_value") == 0);
    CHECK(client.ok({"HGET", "cache:prices", "rebuilds"}).str == "1");
    CHECK(client.ok({"HGET", "cache:prices", "value"}).str == "prices v1");
  }
}
