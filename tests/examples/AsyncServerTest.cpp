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

TEST_SUITE("async server example") {
  TEST_CASE("one thread serves 1000 concurrent requests over 10 account locks: no update lost, no key left") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const Finished finished =
        run({DLOCK_EXAMPLE_ASYNC_SERVER, "--uri", server.uri(), "--requests", "1000", "--accounts", "10"});
    CHECK_MESSAGE(finished.exitCode == 0, finished.output);
    CHECK(resultField(finished.output, "answered") == 1000);
    CHECK(resultField(finished.output, "balance_total") == 1000);
    // Requests waited together for their account: far more in flight than the 10 accounts.
    CHECK(resultField(finished.output, "peak_in_flight") > 10);
    for (int account = 0; account < 10; ++account) {
      CHECK(client.ok({"EXISTS", "dlock:{account:" + std::to_string(account) + "}"}).integer == 0);
    }
  }
}
