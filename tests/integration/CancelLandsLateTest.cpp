// SPDX-License-Identifier: Apache-2.0
// An acquire its client gave up can never take the key, however long its bytes wait on the path:
// the script carries the instant its caller stopped waiting and the server refuses it after that
// (DLOCKLATE), even once the cancel's tombstone has expired.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "redis/src/FairScripts.h"
#include "LinkProxy.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "redis/src/Scripts.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::LinkProxy;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// The keys of `key` other than its fencing counter: the lock, a tombstone, a fair queue.
long long keysBesidesFence(RedisClient& admin, const std::string& key) {
  long long count = 0;
  for (const auto& name : admin.ok({"KEYS", "dlock:{" + key + "}*"}).elements) {
    if (name.str != "dlock:{" + key + "}:fence") ++count;
  }
  return count;
}

// tryLock(key) once while the proxy holds the connection that sends `marker` (the acquire's
// script): it times out and is cancelled. The held acquire is let through only after everything the
// cancel left (its tombstone) has expired; the server must refuse it then.
void checkHeldAcquireNeverLands(bool fair, const std::string& marker) {
  RedisProcess server;
  RedisClient admin(server.host(), server.port());
  LinkProxy proxy(server.host(), server.port());
  const auto backend = dlock::connect(proxy.uri() + "?command_timeout=500ms");
  const auto lock = dlock::LockBuilder().backend(backend).fair(fair).build();
  REQUIRE(lock->tryLock("warm-up"));  // loads the scripts: the held EVALSHA is the acquire itself
  lock->unlock("warm-up");

  proxy.holdClientsSending(marker);
  // No reply: the acquire is held (the proxy's connection may already be closed by the cleanup).
  REQUIRE_THROWS_WITH_AS((void)lock->tryLock("k"), doctest::Contains("timed out"), dlock::ConnectionError);
  // The cancel's tombstone (command_timeout + retry budget) ends; the acquire still waits.
  REQUIRE(dlock::test::eventually([&] { return keysBesidesFence(admin, "k") == 0; }));
  proxy.release();
  CHECK(dlock::test::eventually([&] { return admin.errorReplies("DLOCKLATE") >= 1; }));  // it arrived, refused
  CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
  const bool free = lock->tryLock("k");  // the key is free for the next caller
  CHECK(free);
  if (free) lock->unlock("k");
}

}  // namespace

TEST_SUITE("CancelLandsLate") {
  TEST_CASE("Redlock: acquires held on the path to every node past their cancel never take the key") {
    std::vector<std::unique_ptr<RedisProcess>> servers;
    std::vector<std::unique_ptr<LinkProxy>> proxies;
    std::string uri = "redlock://";
    for (int i = 0; i < 3; ++i) {
      servers.push_back(std::make_unique<RedisProcess>());
      proxies.push_back(std::make_unique<LinkProxy>(servers.back()->host(), servers.back()->port()));
      uri += (i > 0 ? "," : "") + proxies.back()->address();
    }
    const auto lock = dlock::LockBuilder().backend(dlock::connect(uri + "?node_timeout=300ms&command_timeout=500ms")).build();
    REQUIRE(lock->tryLock("warm-up"));  // loads the scripts: each held EVALSHA is an acquire
    lock->unlock("warm-up");
    for (auto& proxy : proxies) proxy->holdClientsSending(dlock::detail::acquireScript().sha);
    CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);  // no node answered
    std::vector<std::unique_ptr<RedisClient>> admins;
    for (auto& server : servers) admins.push_back(std::make_unique<RedisClient>(server->host(), server->port()));
    for (auto& admin : admins) REQUIRE(dlock::test::eventually([&] { return keysBesidesFence(*admin, "k") == 0; }));
    for (auto& proxy : proxies) proxy->release();
    for (auto& admin : admins) CHECK(dlock::test::eventually([&] { return admin->errorReplies("DLOCKLATE") >= 1; }));
    for (auto& admin : admins) CHECK(admin->ok({"EXISTS", "dlock:{k}"}).integer == 0);
  }


  TEST_CASE("an acquire held on the path past its cancel's tombstone never takes the key (default lock)") {
    checkHeldAcquireNeverLands(false, dlock::detail::acquireScript().sha);
  }

  TEST_CASE("a fair join held on the path past its leave never takes the key or a place (fair lock)") {
    checkHeldAcquireNeverLands(true, dlock::detail::fairAcquireScript(false).sha);
  }
}
