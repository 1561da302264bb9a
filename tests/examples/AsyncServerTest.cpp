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
        run({DLOCK_EXAMPLE_ASYNC_SERVER, "--uri", server.uri(), "--requests", "1000", "--accounts", "10", "--together"});
    CHECK_MESSAGE(finished.exitCode == 0, finished.output);
    CHECK(resultField(finished.output, "answered") == 1000);
    CHECK(resultField(finished.output, "balance_total") == 1000);
    // Served once all had arrived: the 1000 requests were in flight at once, 990 of them waiting
    // for an account another held, on the one thread of the loop (and dlock's fixed few).
    CHECK(resultField(finished.output, "peak_in_flight") == 1000);
    // A tenth of the requests, all waiting at once too: the same threads (none per waiter).
    const Finished fewer =
        run({DLOCK_EXAMPLE_ASYNC_SERVER, "--uri", server.uri(), "--requests", "100", "--accounts", "10", "--together"});
    CHECK_MESSAGE(fewer.exitCode == 0, fewer.output);
    CHECK(resultField(fewer.output, "peak_in_flight") == 100);
    CHECK(resultField(fewer.output, "threads") == resultField(finished.output, "threads"));
    for (int account = 0; account < 10; ++account) {
      CHECK(client.ok({"EXISTS", "dlock:{account:" + std::to_string(account) + "}"}).integer == 0);
    }
  }
}
