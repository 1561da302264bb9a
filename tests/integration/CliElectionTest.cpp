// SPDX-License-Identifier: Apache-2.0
// The election forms of the `dlock` command against a real redis-server: `--elect NAME` runs one
// command at a time and hands over when it ends, `leader NAME` prints the leader (or none, exit
// 1), `leader NAME --follow` prints each change.
#include <doctest/doctest.h>

#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "RedisProcess.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisProcess;

namespace {

ChildProcess dlockCommand(const RedisProcess& server, std::vector<std::string> args) {
  std::vector<std::string> argv{DLOCK_CLI, "--uri", server.uri()};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess(argv);
}

// `dlock leader NAME`: its exit status and its output lines.
std::pair<int, std::vector<std::string>> leaderNow(const RedisProcess& server, const std::string& name) {
  ChildProcess leader = dlockCommand(server, {"leader", name});
  std::vector<std::string> lines;
  while (auto line = leader.readLine()) lines.push_back(*line);
  return {leader.wait(), lines};
}

}  // namespace

TEST_SUITE("CliElection") {
  TEST_CASE("--elect runs one command at a time, the next when it ends, and leader prints who leads") {
    RedisProcess server;
    auto [noneStatus, noneLines] = leaderNow(server, "cron");
    CHECK(noneStatus == 1);
    REQUIRE(noneLines.size() == 1);
    CHECK(noneLines[0] == "leader: none");

    ChildProcess first = dlockCommand(server, {"--ttl", "2s", "--elect", "cron", "--", "sh", "-c", "echo first; exec sleep 60"});
    REQUIRE(first.readLine().value_or("") == "first");
    ChildProcess second = dlockCommand(server, {"--ttl", "2s", "--elect", "cron", "--", "sh", "-c", "echo second; exec sleep 60"});
    auto [status, lines] = leaderNow(server, "cron");
    CHECK(status == 0);
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].find("pid=" + std::to_string(first.pid())) != std::string::npos);
    CHECK(lines[1].rfind("term: ", 0) == 0);
    CHECK_FALSE(second.readLine(300ms).has_value());  // waits its turn while the first leads

    first.signal(SIGTERM);  // passed on to its command, which ends; the term is resigned
    CHECK(first.wait() == 128 + SIGTERM);
    REQUIRE(second.readLine().value_or("") == "second");
    auto [after, afterLines] = leaderNow(server, "cron");
    CHECK(after == 0);
    REQUIRE(afterLines.size() == 2);
    CHECK(afterLines[0].find("pid=" + std::to_string(second.pid())) != std::string::npos);
    CHECK(afterLines[1] > lines[1]);  // same length of digits: a later term
    second.signal(SIGTERM);
    CHECK(second.wait() == 128 + SIGTERM);
  }

  TEST_CASE("leader --follow prints the leader now, each new term, and none between terms") {
    RedisProcess server;
    ChildProcess follower = dlockCommand(server, {"leader", "jobs", "--follow"});
    REQUIRE(follower.readLine().value_or("") == "none");
    ChildProcess elected = dlockCommand(server, {"--elect", "jobs", "--", "sh", "-c", "exec sleep 60"});
    const std::string leading = follower.readLine().value_or("");
    CHECK(leading.rfind("term ", 0) == 0);
    CHECK(leading.find("pid=" + std::to_string(elected.pid())) != std::string::npos);
    elected.signal(SIGTERM);
    CHECK(elected.wait() == 128 + SIGTERM);
    CHECK(follower.readLine().value_or("") == "none");
    follower.signal(SIGINT);
    CHECK(follower.wait() == 128 + SIGINT);
  }

  TEST_CASE("the election forms refuse what does not apply to them, with exit status 2") {
    RedisProcess server;
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"--elect", "x", "key", "--", "true"},
                                               {"--elect", "x", "--fair", "--", "true"},
                                               {"--elect", "x", "--no-wait", "--", "true"},
                                               {"--elect", "x"},
                                               {"leader"},
                                               {"leader", "x", "--ttl", "1s"},
                                               {"status", "x", "--follow"}}) {
      ChildProcess refused = dlockCommand(server, args);
      CHECK_MESSAGE(refused.wait() == 2, args.front(), " ", args.back());
    }
  }
}
