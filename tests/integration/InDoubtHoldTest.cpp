// SPDX-License-Identifier: Apache-2.0
// A hold whose releasing or changing script was cut off (the server paused with it queued) is not
// reported held: the script may run when the server resumes, and another process may then take the
// key. isHeld is false, unlock reports LockLostError unless the server's record shows this hold's
// own release ran, and the lost handler hears of a hold given up by a Condition wait in doubt. A
// release record written by a Condition's await never vouches for an unlock.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/Condition.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// A server whose clients give up on a reply after 300 ms, and two locks on it: two processes.
struct PausedServer {
  RedisProcess server;
  RedisClient admin{server.host(), server.port()};
  std::string uri = server.uri() + "?command_timeout=300ms";

  std::shared_ptr<dlock::ILock> lock(bool fair) const {
    return dlock::LockBuilder().backend(dlock::connect(uri)).fair(fair).outageTolerance(0ms).build();
  }
  // Resumes the server at scope exit, whatever a failed check did.
  struct Resume {
    RedisProcess& server;
    ~Resume() { server.resume(); }
  };
};

void checkAwaitInDoubt(bool fair) {
  PausedServer s;
  const auto a = s.lock(fair);
  const auto b = s.lock(fair);
  std::atomic<int> lost{0};
  a->onLockLost([&](std::string_view key, std::uint64_t) {
    if (key == "k") lost.fetch_add(1);
  });
  REQUIRE(a->tryLock("k"));
  dlock::Condition cond = a->newCondition("k", "c");
  CHECK_FALSE(cond.awaitFor(1ms));  // scripts loaded: the await below is one EVALSHA
  {
    PausedServer::Resume resume{s.server};
    s.server.pause();
    CHECK_THROWS_AS((void)cond.awaitFor(300ms), dlock::ConnectionError);
    // The await is queued on the paused server: it may run when it resumes, so the key is in doubt.
    CHECK_FALSE(a->isHeld("k"));
  }
  // The server ran what was queued; the key is free for another process, which takes it.
  REQUIRE(dlock::test::eventually([&] { return b->tryLock("k", 100ms); }));
  CHECK_FALSE(a->isHeld("k"));
  CHECK(dlock::test::eventually([&] { return lost.load() == 1; }));
  CHECK_THROWS_AS(a->unlock("k"), dlock::LockLostError);
  CHECK(b->isHeld("k"));
  b->unlock("k");
}

}  // namespace

TEST_SUITE("InDoubtHold") {
  TEST_CASE("a Condition wait cut off by a paused server: the hold is not reported held beside another's") {
    SUBCASE("default lock") { checkAwaitInDoubt(false); }
    SUBCASE("fair lock") { checkAwaitInDoubt(true); }
  }

  TEST_CASE("a release cut off by a paused server is not reported held, and its retry is judged by its own record") {
    PausedServer s;
    const auto a = s.lock(false);
    REQUIRE(a->tryLock("k"));
    {
      PausedServer::Resume resume{s.server};
      s.server.pause();
      CHECK_THROWS_AS(a->unlock("k"), dlock::ConnectionError);
      CHECK_FALSE(a->isHeld("k"));
    }
    // Whether the queued release ran (the retry finds its record) or its connection was closed
    // first (the retry frees the key still ours), this hold's retry is a clean release.
    CHECK_NOTHROW(dlock::test::onceRecovered([&] { a->unlock("k"); }));
    CHECK(s.admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK_THROWS_AS(a->unlock("k"), dlock::NotOwnerError);
  }
}
