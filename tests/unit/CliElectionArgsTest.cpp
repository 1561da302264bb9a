// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tools/dlock/CliArgs.h"

using dlock::cli::CliOptions;
using dlock::cli::Mode;
using dlock::cli::UsageError;
using dlock::cli::parseArgs;

TEST_SUITE("CliElectionArgs") {
  TEST_CASE("--elect NAME -- COMMAND runs COMMAND in the election NAME with the lease of --ttl") {
    const CliOptions options = parseArgs({"--ttl", "10s", "--elect", "scheduler", "--", "run", "it"}, nullptr);
    CHECK(options.mode == Mode::Run);
    CHECK(options.elect);
    CHECK(options.key == "scheduler");
    CHECK(options.ttl == std::chrono::seconds(10));
    CHECK(options.command == std::vector<std::string>{"run", "it"});
    CHECK_FALSE(parseArgs({"k", "--", "true"}, nullptr).elect);
  }

  TEST_CASE("leader NAME, with or without --follow") {
    const CliOptions once = parseArgs({"leader", "scheduler"}, nullptr);
    CHECK(once.mode == Mode::Leader);
    CHECK(once.key == "scheduler");
    CHECK_FALSE(once.follow);
    CHECK(parseArgs({"--uri", "memory://", "leader", "scheduler", "--follow"}, nullptr).follow);
    // With "--" it is a key named "leader", as for status.
    CHECK(parseArgs({"leader", "--", "true"}, nullptr).mode == Mode::Run);
  }

  TEST_CASE("the election forms refuse what does not apply to them") {
    const std::vector<std::vector<std::string>> refused = {
        {"--elect", "x", "key", "--", "true"}, {"--elect", "x", "--fair", "--", "true"},
        {"--elect", "x", "--read", "--", "true"}, {"--elect", "x", "--wait", "5s", "--", "true"},
        {"--elect", "x", "--permits", "1", "--capacity", "2", "--", "true"}, {"--elect", "x", "true"},
        {"--elect", "x", "--"}, {"--elect", "", "--", "true"}, {"leader"}, {"leader", "a", "b"},
        {"leader", "x", "--ttl", "1s"}, {"status", "x", "--follow"}, {"k", "--follow", "--", "true"}};
    for (const auto& args : refused) CHECK_THROWS_AS((void)parseArgs(args, nullptr), UsageError);
  }
}
