// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "ExampleProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ExampleProcess;
using dlock::test::Finished;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::resultField;
using dlock::test::run;

namespace {

const std::string kSignup = DLOCK_EXAMPLE_SIGNUP;

// The ids of the accounts named `name`, read straight from Redis.
std::vector<std::string> accountsNamed(RedisClient& client, const std::string& name) {
  std::vector<std::string> ids;
  const auto last = client.ok({"GET", "account:next-id"});
  const long long count = last.isNil() ? 0 : std::stoll(last.str);
  for (long long id = 1; id <= count; ++id) {
    if (client.ok({"HGET", "account:" + std::to_string(id), "name"}).str == name) ids.push_back(std::to_string(id));
  }
  return ids;
}

}  // namespace

TEST_SUITE("signup example") {
  TEST_CASE("eight threads signing up one name: one account, the others told to try again later") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const Finished finished = run({kSignup, "race", "--uri", server.uri(), "--name", "alice", "--users", "8"});
    CHECK_MESSAGE(finished.exitCode == 0, finished.output);
    CHECK_MESSAGE(finished.output.find("RESULT ok ") != std::string::npos, finished.output);
    CHECK(resultField(finished.output, "created") == 1);
    CHECK(resultField(finished.output, "try_later") + resultField(finished.output, "taken") == 7);
    CHECK(resultField(finished.output, "failed") == 0);
    const auto ids = accountsNamed(client, "alice");
    REQUIRE(ids.size() == 1);
    CHECK(client.ok({"HGET", "account:by-name", "alice"}).str == ids.front());
    CHECK(client.ok({"EXISTS", "dlock:{signup:alice}"}).integer == 0);
  }

  TEST_CASE("four processes signing up one name: exactly one creates the account") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    std::vector<ExampleProcess> processes;
    for (int i = 0; i < 4; ++i) {
      processes.emplace_back(std::vector<std::string>{kSignup, "register", "--uri", server.uri(), "--name", "bob",
                                                      "--email", "bob" + std::to_string(i) + "@example.org"});
    }
    int created = 0;
    for (auto& process : processes) {
      const Finished finished = process.wait();
      // 0 created; 75 told to try again later; 3 came after the account existed.
      CHECK_MESSAGE((finished.exitCode == 0 || finished.exitCode == 75 || finished.exitCode == 3), finished.output);
      if (finished.exitCode == 0) ++created;
    }
    CHECK(created == 1);
    CHECK(accountsNamed(client, "bob").size() == 1);
    const Finished checked = run({kSignup, "check", "--uri", server.uri(), "--name", "bob"});
    CHECK_MESSAGE(checked.exitCode == 0, checked.output);
  }

  TEST_CASE("a sign-up meets the name locked, then free, then taken, and the check catches a duplicate") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const std::vector<std::string> signUp{kSignup, "register", "--uri", server.uri(), "--name", "carol",
                                          "--work-ms", "10"};
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(30s).build();
    REQUIRE(lock->tryLock("signup:carol"));
    const Finished busy = run(signUp);
    CHECK_MESSAGE(busy.exitCode == 75, busy.output);
    CHECK(busy.output.find("try again later") != std::string::npos);
    CHECK(accountsNamed(client, "carol").empty());
    lock->unlock("signup:carol");

    const Finished created = run(signUp);
    CHECK_MESSAGE(created.exitCode == 0, created.output);
    CHECK(created.output.find("created") != std::string::npos);
    const Finished taken = run(signUp);
    CHECK_MESSAGE(taken.exitCode == 3, taken.output);
    CHECK(taken.output.find("name taken") != std::string::npos);
    CHECK(accountsNamed(client, "carol").size() == 1);
    CHECK(run({kSignup, "check", "--uri", server.uri(), "--name", "carol"}).exitCode == 0);

    // What an unprotected sign-up would leave behind: a second account with the same name.
    const auto id = std::to_string(client.ok({"INCR", "account:next-id"}).integer);
    client.ok({"HSET", "account:" + id, "name", "carol", "email", "other@example.org"});
    const Finished duplicate = run({kSignup, "check", "--uri", server.uri(), "--name", "carol"});
    CHECK(duplicate.exitCode == 1);
    CHECK_MESSAGE(duplicate.output.find("accounts named 'carol': 2") != std::string::npos, duplicate.output);
  }
}
