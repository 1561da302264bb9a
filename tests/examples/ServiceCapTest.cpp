// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <string>

#include "ExampleProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"

using dlock::test::ExampleProcess;
using dlock::test::Finished;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::resultField;
using dlock::test::run;

namespace {

const std::string kServiceCap = DLOCK_EXAMPLE_SERVICE_CAP;

}  // namespace

TEST_SUITE("service cap example") {
  TEST_CASE("two processes of eight workers share four permits: never more than four calls in flight, none throttled") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const std::vector<std::string> argv{kServiceCap, "--uri", server.uri(), "--workers", "8", "--calls", "5"};
    ExampleProcess first(argv);
    ExampleProcess second(argv);
    const Finished one = first.wait();
    const Finished two = second.wait();
    for (const Finished* finished : {&one, &two}) {
      CHECK_MESSAGE(finished->exitCode == 0, finished->output);
      CHECK(resultField(finished->output, "answered") == 40);
      CHECK(resultField(finished->output, "throttled") == 0);
    }
    CHECK(std::stoll(client.ok({"GET", "service:payments-api:peak"}).str) == 4);  // the cap, and reached
    CHECK(client.ok({"GET", "service:payments-api:in-flight"}).str == "0");
  }

  TEST_CASE("uncapped, the same calls overrun the service's limit: throttled, and the check fails") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const Finished finished = run({kServiceCap, "uncapped", "--uri", server.uri(), "--workers", "8", "--calls", "5"});
    CHECK_MESSAGE(finished.exitCode == 1, finished.output);
    CHECK(resultField(finished.output, "throttled") > 0);
    CHECK(resultField(finished.output, "peak") > 4);
  }

  TEST_CASE("a second process built with another capacity is refused, naming both") {
    RedisProcess server;
    const Finished four = run({kServiceCap, "--uri", server.uri(), "--workers", "1", "--calls", "1"});
    REQUIRE_MESSAGE(four.exitCode == 0, four.output);
    const Finished six = run({kServiceCap, "--uri", server.uri(), "--workers", "1", "--calls", "1", "--permits", "6"});
    CHECK(six.exitCode == 1);
    CHECK_MESSAGE(six.output.find("stored with capacity 4, not 6") != std::string::npos, six.output);
  }
}
