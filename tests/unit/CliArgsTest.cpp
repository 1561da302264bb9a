// SPDX-License-Identifier: Apache-2.0
// The `dlock` command line (tools/dlock/CliArgs): options, modes, durations, usage errors, and
// the passwords found in its arguments and masked in its messages (the URIs it prints go through
// dlock::redactUri: tests/unit/UriTest.cpp).
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tools/dlock/CliArgs.h"
#include "dlock/LockOptions.h"
#include "dlock/common/RedisOptions.h"
#include "dlock/duration.h"

using namespace std::chrono_literals;
using dlock::cli::CliOptions;
using dlock::cli::Mode;
using dlock::cli::OnLost;
using dlock::cli::parseArgs;
using dlock::cli::UsageError;

namespace {

// The command reads durations with the library's one parser, a bare number being seconds.
std::optional<std::chrono::milliseconds> parseDuration(std::string_view text) {
  return dlock::parseDuration(text, dlock::BareNumber::Seconds, dlock::cli::kMaxDuration);
}

CliOptions parse(const std::vector<std::string>& args, const char* environment = nullptr) {
  return parseArgs(args, environment);
}

// The UsageError message of parsing `args`; empty when it parsed.
std::string usageErrorOf(const std::vector<std::string>& args) {
  try {
    (void)parseArgs(args, nullptr);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

}  // namespace

TEST_SUITE("CliArgs") {
  TEST_CASE("--permits N --capacity C ask for N of the C permits of the semaphore KEY, both or neither, N <= C") {
    const CliOptions options = parse({"--permits", "2", "--capacity=5", "backup", "--", "true"});
    REQUIRE(options.permits);
    CHECK(options.permits->count == 2);
    CHECK(options.permits->capacity == 5);
    CHECK_FALSE(parse({"backup", "--", "true"}).permits);
    CHECK(usageErrorOf({"--permits", "2", "k", "--", "true"}) == "--permits and --capacity go together");
    CHECK(usageErrorOf({"--capacity", "2", "k", "--", "true"}) == "--permits and --capacity go together");
    CHECK(usageErrorOf({"--permits", "3", "--capacity", "2", "k", "--", "true"}) == "--permits 3 is more than --capacity 2");
    CHECK(usageErrorOf({"--permits", "0", "--capacity", "2", "k", "--", "true"}).find("not a number of permits") !=
          std::string::npos);
    CHECK(usageErrorOf({"--permits", "1", "--capacity", "1000001", "k", "--", "true"}).find("from 1 to 1000000") !=
          std::string::npos);
    CHECK(usageErrorOf({"--permits", "x", "--capacity", "2", "k", "--", "true"}) != "");
    CHECK(usageErrorOf({"--fair", "--permits", "1", "--capacity", "2", "k", "--", "true"}).find("--fair") !=
          std::string::npos);
    CHECK(usageErrorOf({"--permits", "1", "--capacity", "2", "status", "k"}) == "--permits does not apply to status");
  }

  TEST_CASE("--fair asks for a fair lock, and does not apply to status") {
    CHECK_FALSE(parse({"k", "--", "true"}).fair);
    CHECK(parse({"--fair", "k", "--", "true"}).fair);
    CHECK(usageErrorOf({"status", "k", "--fair"}) == "--fair does not apply to status");
    CHECK(usageErrorOf({"--fair=1", "k", "--", "true"}) == "--fair takes no value");
  }

  TEST_CASE("--read and --write ask for the key's read-write lock, they exclude each other, --fair and status") {
    CHECK(parse({"k", "--", "true"}).access == dlock::cli::Access::Exclusive);
    CHECK(parse({"--read", "k", "--", "true"}).access == dlock::cli::Access::Read);
    CHECK(parse({"k", "--write", "--", "true"}).access == dlock::cli::Access::Write);
    CHECK(parse({"--read", "--read", "k", "--", "true"}).access == dlock::cli::Access::Read);
    CHECK_THROWS_AS(parse({"--read", "--write", "k", "--", "true"}), dlock::cli::UsageError);
    CHECK_THROWS_AS(parse({"--write", "--fair", "k", "--", "true"}), dlock::cli::UsageError);
    CHECK_THROWS_AS(parse({"--read", "status", "k"}), dlock::cli::UsageError);
    CHECK_THROWS_AS(parse({"--read=1", "k", "--", "true"}), dlock::cli::UsageError);
  }

  TEST_CASE("KEY -- COMMAND takes the defaults: wait as long as it takes, 30s lease, codes 1 and 3") {
    const CliOptions options = parse({"nightly", "--", "backup.sh", "--full"});
    CHECK(options.mode == Mode::Run);
    CHECK(options.key == "nightly");
    CHECK(options.command == std::vector<std::string>{"backup.sh", "--full"});
    CHECK(options.uri == "redis://127.0.0.1:6379");
    CHECK(options.ttl == 30s);
    CHECK_FALSE(options.wait.has_value());
    CHECK(options.conflictExitCode == 1);
    CHECK(options.lostExitCode == 3);
    CHECK(options.onLost == OnLost::Terminate);
    CHECK(options.grace == 5s);
    CHECK_FALSE(options.verbose);
    CHECK(options.ownerLabel == std::optional<std::string>(""));  // host and pid, no text of its own
  }

  TEST_CASE("--owner-label adds text to the owner label, --no-owner-label records none") {
    CHECK(parse({"--owner-label", "job=7 \r\n", "k", "--", "true"}).ownerLabel == std::optional<std::string>("job=7 \r\n"));
    CHECK(parse({"--owner-label=", "k", "--", "true"}).ownerLabel == std::optional<std::string>(""));
    CHECK_FALSE(parse({"--no-owner-label", "k", "--", "true"}).ownerLabel.has_value());
    CHECK(usageErrorOf({"--owner-label", "a", "--no-owner-label", "k", "--", "true"}) ==
          "--owner-label and --no-owner-label exclude each other");
    CHECK(usageErrorOf({"--read", "--permits", "1", "--capacity", "2", "k", "--", "true"}) ==
          "--read and --permits exclude each other: a key is a read-write lock or a semaphore");
    CHECK(usageErrorOf({"--permits", "1", "--capacity", "2", "--write", "k", "--", "true"}) ==
          "--write and --permits exclude each other: a key is a read-write lock or a semaphore");
    CHECK(dlock::cli::tokenPrefix("0123456789abcdef0123456789abcdef") == "01234567...");
    CHECK(usageErrorOf({"--owner-label", std::string(257, 'x'), "k", "--", "true"}) ==
          "--owner-label has 257 bytes, more than the limit of 256");
    CHECK(usageErrorOf({"--no-owner-label", "status", "k"}) == "--no-owner-label does not apply to status");
  }

  TEST_CASE("every option, in both --name value and --name=value forms, before and after KEY") {
    const CliOptions options =
        parse({"--uri", "redis://10.1.2.3:7000/2", "--ttl=2m", "k", "--wait", "1.5s", "--conflict-exit-code=75",
               "--lost-exit-code", "9", "--on-lost", "ignore", "--grace=250ms", "--verbose", "--", "make", "--", "x"});
    CHECK(options.uri == "redis://10.1.2.3:7000/2");
    CHECK(options.ttl == 2min);
    CHECK(options.key == "k");
    CHECK(options.wait == 1500ms);
    CHECK(options.conflictExitCode == 75);
    CHECK(options.lostExitCode == 9);
    CHECK(options.onLost == OnLost::Ignore);
    CHECK(options.grace == 250ms);
    CHECK(options.verbose);
    CHECK(options.command == std::vector<std::string>{"make", "--", "x"});  // only the first -- separates
  }

  TEST_CASE("flock's short forms -n, -w and -E, and -v") {
    const CliOptions noWait = parse({"-n", "-E", "0", "-v", "k", "--", "true"});
    CHECK(noWait.wait == 0ms);
    CHECK(noWait.conflictExitCode == 0);
    CHECK(noWait.verbose);
    CHECK(parse({"-w", "10", "k", "--", "true"}).wait == 10s);
    CHECK(parse({"--wait", "0", "k", "--", "true"}).wait == 0ms);
  }

  TEST_CASE("$DLOCK_URI is the default URI and --uri overrides it") {
    CHECK(parse({"k", "--", "true"}, "memory://").uri == "memory://");
    CHECK(parse({"k", "--", "true"}, "").uri == "redis://127.0.0.1:6379");
    CHECK(parse({"--uri", "redis://127.0.0.1:7001", "k", "--", "true"}, "memory://").uri == "redis://127.0.0.1:7001");
  }

  TEST_CASE("status KEY takes --uri and --verbose only, and 'status' before -- is an ordinary key") {
    const CliOptions status = parse({"--uri", "memory://", "status", "db-migrate"});
    CHECK(status.mode == Mode::Status);
    CHECK(status.key == "db-migrate");
    CHECK(parse({"status", "k", "-v"}).verbose);

    const CliOptions run = parse({"status", "--", "true"});
    CHECK(run.mode == Mode::Run);
    CHECK(run.key == "status");

    CHECK(usageErrorOf({"status"}) == "status takes one KEY");
    CHECK(usageErrorOf({"status", "a", "b"}) == "status takes one KEY");
    CHECK(usageErrorOf({"--ttl", "1s", "status", "k"}) == "--ttl does not apply to status");
    CHECK(usageErrorOf({"status", "k", "-n"}) == "--no-wait does not apply to status");
  }

  TEST_CASE("resize KEY N takes --uri and --verbose only, N a capacity from 1 to kMaxSemaphorePermits") {
    const CliOptions resize = parse({"--uri", "memory://", "resize", "nightly-backup", "3"});
    CHECK(resize.mode == Mode::Resize);
    CHECK(resize.key == "nightly-backup");
    CHECK(resize.capacity == 3);
    CHECK(parse({"resize", "k", "1000000", "-v"}).verbose);
    CHECK(parse({"resize", "--", "true"}).key == "resize");  // before --: an ordinary key

    CHECK(usageErrorOf({"resize", "k"}) == "resize takes a KEY and a capacity N");
    CHECK(usageErrorOf({"resize", "k", "2", "3"}) == "resize takes a KEY and a capacity N");
    CHECK(usageErrorOf({"resize", "k", "0"}) == "resize k: '0' is not a number of permits from 1 to 1000000");
    CHECK(usageErrorOf({"resize", "k", "1000001"}) ==
          "resize k: '1000001' is not a number of permits from 1 to 1000000");
    CHECK(usageErrorOf({"resize", "k", "two"}) == "resize k: 'two' is not a number of permits from 1 to 1000000");
    CHECK(usageErrorOf({"--wait", "1s", "resize", "k", "2"}) == "--wait does not apply to resize");
    CHECK(usageErrorOf({"resize", "", "2"}) == "KEY is empty");
  }

  TEST_CASE("the help shows resize and how long a stored capacity lasts: the backend's default fence_ttl") {
    const std::string help = dlock::cli::helpText();
    CHECK(help.find("dlock [--uri URI] resize KEY N") != std::string::npos);
    CHECK(dlock::cli::usageText().find("dlock [--uri URI] resize KEY N") != std::string::npos);
    const std::string fenceTtl = dlock::cli::formatDuration(dlock::kDefaultFenceTtl);
    CHECK(help.find("fence_ttl (a URI option, " + fenceTtl + " by default)") != std::string::npos);
    CHECK(help.find("12h to 24h after the last one") != std::string::npos);
    CHECK(fenceTtl == "24h");  // the "12h to 24h" above: half of it and all of it
  }

  TEST_CASE("--help and --version win over the rest of the line") {
    CHECK(parse({"--help"}).mode == Mode::Help);
    CHECK(parse({"k", "-h", "--", "true"}).mode == Mode::Help);
    CHECK(parse({"--version"}).mode == Mode::Version);
    CHECK(dlock::cli::helpText().find("Usage: dlock [OPTIONS] KEY -- COMMAND") == 0);
    CHECK(dlock::cli::helpText().find("Examples:") != std::string::npos);
  }

  TEST_CASE("the help states the outage tolerance of a wait without --wait: the library's default, which dlock uses") {
    const std::string tolerance = dlock::cli::formatDuration(dlock::LockOptions().outageTolerance);
    CHECK(dlock::cli::helpText().find("without --wait, for " + tolerance + " from the") != std::string::npos);
  }

  TEST_CASE("malformed lines are usage errors that name the problem") {
    CHECK(usageErrorOf({}) == "no KEY");
    CHECK(usageErrorOf({"k"}) == "expected '--' between KEY and COMMAND");
    CHECK(usageErrorOf({"k", "cmd"}) == "expected '--' between KEY and COMMAND");
    CHECK(usageErrorOf({"k", "--"}) == "no COMMAND after '--'");
    CHECK(usageErrorOf({"k", "--", ""}) == "COMMAND is empty");
    CHECK(usageErrorOf({"a", "b", "--", "true"}) == "expected one KEY before '--', got 2");
    CHECK(usageErrorOf({"--", "true"}) == "no KEY");
    CHECK(usageErrorOf({"", "--", "true"}) == "KEY is empty");
    CHECK(usageErrorOf({std::string(1025, 'k'), "--", "true"}) ==
          "KEY has 1025 bytes, more than the limit of 1024");
    CHECK(usageErrorOf({"--bogus", "k", "--", "true"}) == "unknown option '--bogus'");
    CHECK(usageErrorOf({"-x", "k", "--", "true"}) == "unknown option '-x'");
    CHECK(usageErrorOf({"k", "--", "true", "--ttl"}).empty());  // after --, all belongs to COMMAND
    CHECK(usageErrorOf({"k", "--ttl"}) == "--ttl needs a value");
    CHECK(usageErrorOf({"k", "--ttl", "--", "true"}) == "--ttl needs a value");
    CHECK(usageErrorOf({"--no-wait=1", "k", "--", "true"}) == "--no-wait takes no value");
    CHECK(usageErrorOf({"--uri=", "k", "--", "true"}) == "--uri is empty");
    CHECK(usageErrorOf({"--ttl", "5x", "k", "--", "true"}) == "--ttl: '5x' is not a duration (e.g. 500ms, 30s, 2m)");
    CHECK(usageErrorOf({"--ttl", "5ms", "k", "--", "true"}) == "--ttl must be at least 10ms, got '5ms'");
    CHECK(usageErrorOf({"-w", "-1", "k", "--", "true"}) == "--wait: '-1' is not a duration (e.g. 500ms, 30s, 2m)");
    CHECK(usageErrorOf({"-E", "256", "k", "--", "true"}) == "--conflict-exit-code: '256' is not an exit status from 0 to 255");
    CHECK(usageErrorOf({"--lost-exit-code", "x", "k", "--", "true"}) ==
          "--lost-exit-code: 'x' is not an exit status from 0 to 255");
    CHECK(usageErrorOf({"--on-lost", "kill", "k", "--", "true"}) ==
          "--on-lost: 'kill' is neither 'terminate' nor 'ignore'");
    CHECK(usageErrorOf({"-n", "-w", "1s", "k", "--", "true"}) == "--wait and --no-wait exclude each other");
  }

  TEST_CASE("durations take us, ms, s, m, h, fractions and bare seconds, and refuse garbage and overflow") {
    CHECK(parseDuration("250us") == 1ms);  // rounded up
    CHECK(parseDuration("1500us") == 2ms);
    CHECK(parseArgs({"--wait", "10", "k", "--", "true"}, nullptr).wait == 10s);  // flock -w 10
    CHECK(parseArgs({"--wait", "1.5m", "--ttl", "2500ms", "k", "--", "true"}, nullptr).wait == 90s);
    CHECK(parseDuration("500ms") == 500ms);
    CHECK(parseDuration("30s") == 30s);
    CHECK(parseDuration("2m") == 2min);
    CHECK(parseDuration("1h") == 1h);
    CHECK(parseDuration("1.5s") == 1500ms);
    CHECK(parseDuration("0.25m") == 15s);
    CHECK(parseDuration("10") == 10s);
    CHECK(parseDuration("0") == 0ms);
    CHECK(parseDuration(".5s") == 500ms);
    CHECK(parseDuration("0.0001s") == 1ms);  // rounded up: a positive duration never becomes 0
    CHECK(parseDuration("1.2345ms") == 2ms);
    CHECK(parseDuration("8760h") == 8760h);
    for (const char* bad : {"", "s", "ms", "-1s", "+1s", "1.", "1.5.2s", "1 s", " 1s", "1S", "1sec", "1d",
                            "1e3", "0x10", "8761h", "99999999999999999999", "1000000000000000s"}) {
      CAPTURE(bad);
      CHECK_FALSE(parseDuration(bad).has_value());
    }
    CHECK(dlock::cli::formatDuration(120000ms) == "2m");
    CHECK(dlock::cli::formatDuration(30000ms) == "30s");
    CHECK(dlock::cli::formatDuration(1500ms) == "1500ms");
    CHECK(dlock::cli::formatDuration(7200000ms) == "2h");
    CHECK(dlock::cli::formatDuration(0ms) == "0ms");
  }

  TEST_CASE("uriSecrets finds the passwords raw and decoded, and scrubSecrets masks them all") {
    using dlock::cli::scrubSecrets;
    using dlock::cli::uriSecrets;
    CHECK(uriSecrets("redis://127.0.0.1:6379").empty());
    CHECK(uriSecrets("redis://app@h").size() == 1);  // password-only form: "app" is the password
    CHECK(uriSecrets("redis://u:p%40ss@h:1") == std::vector<std::string>{"p%40ss", "p@ss"});
    CHECK(uriSecrets("redis://:pa/ss@h:1") == std::vector<std::string>{"pa/ss"});  // malformed, found anyway
    CHECK(uriSecrets("redlock://redis://:one@h1:1;redis://:two2@h2:2") == std::vector<std::string>{"two2", "one"});
    CHECK(uriSecrets("redis+sentinel://h:1/m?sentinel_password=s3&prefix=p") == std::vector<std::string>{"s3"});

    const auto secrets = uriSecrets("redis://u:p%40ss@h:1");
    CHECK(scrubSecrets("bad URI 'redis://u:p%40ss@h:1', auth p@ss failed", secrets) ==
          "bad URI 'redis://u:***@h:1', auth *** failed");
    CHECK(scrubSecrets("xxxx", {"xx"}) == "******");
    CHECK(scrubSecrets("nothing here", {}) == "nothing here");
  }
}
