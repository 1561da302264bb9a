#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using Steady = std::chrono::steady_clock;

namespace {

// Two locks on two operators: as two processes would be (separate connections and subscribers).
struct TwoClients {
  RedisProcess server;
  std::shared_ptr<dlock::ILock> holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).build();
  std::shared_ptr<dlock::ILock> waiter = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).build();
};

}  // namespace

TEST_SUITE("Notify") {
  TEST_CASE("a waiter acquires right after the release, long before the lease would end") {
    TwoClients c;
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<bool> acquired{false};
    Steady::time_point acquiredAt;
    std::thread waiter([&] {
      acquired = c.waiter->tryLock("k", 20s);
      acquiredAt = Steady::now();
      if (acquired) c.waiter->unlock("k");
    });
    std::this_thread::sleep_for(100ms);
    const auto releasedAt = Steady::now();
    c.holder->unlock("k");
    waiter.join();
    REQUIRE(acquired);
    // Not timed to the microsecond: only "well before the 10 s lease", and the recheck bound of
    // NotifyWait (1 s) would also be beaten by polling, so require less than that.
    CHECK(acquiredAt - releasedAt < 900ms);
  }

  TEST_CASE("a waiter whose holder dies without releasing acquires once the lease ends") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto waiter = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).build();
    // A holder that vanished: its key expires in 1.5 s and nobody will publish a release.
    client.ok({"SET", "dlock:{k}", "dead-holder", "PX", "1500"});
    const auto start = Steady::now();
    REQUIRE(waiter->tryLock("k", 10s));
    const auto waited = Steady::now() - start;
    CHECK(waited >= 1400ms);
    CHECK(waited < 5s);
    waiter->unlock("k");
  }

  TEST_CASE("waiters keep working after the server restarts under the subscriber") {
    TwoClients c;
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<bool> first{false};
    std::thread waiter([&] {
      first = c.waiter->tryLock("k", 20s);
      if (first) c.waiter->unlock("k");
    });
    std::this_thread::sleep_for(100ms);
    c.holder->unlock("k");
    waiter.join();
    REQUIRE(first);

    c.server.restart();  // the subscriber's connection dies; the keys are gone too
    // The first call on each pooled connection may meet the dead socket; run() retries once.
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<bool> second{false};
    Steady::time_point acquiredAt;
    std::thread again([&] {
      second = c.waiter->tryLock("k", 20s);
      acquiredAt = Steady::now();
      if (second) c.waiter->unlock("k");
    });
    std::this_thread::sleep_for(1500ms);  // the subscriber has reconnected by now
    const auto releasedAt = Steady::now();
    c.holder->unlock("k");
    again.join();
    REQUIRE(second);
    CHECK(acquiredAt - releasedAt < 900ms);
  }

  TEST_CASE("threads of one process queue for a key: one talks to Redis, all get it in turn") {
    TwoClients c;
    RedisClient client(c.server.host(), c.server.port());
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<int> acquired{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < 6; ++i) {
      waiters.emplace_back([&] {
        if (c.waiter->tryLock("k", 20s)) {
          ++acquired;
          c.waiter->unlock("k");
        }
      });
    }
    std::this_thread::sleep_for(300ms);
    const auto before = client.commandCalls()["evalsha"];
    std::this_thread::sleep_for(500ms);
    // Queued waiters make no calls while the key stays held (the head sleeps on the subscription).
    CHECK(client.commandCalls()["evalsha"] - before <= 2);
    c.holder->unlock("k");
    for (auto& w : waiters) w.join();
    CHECK(acquired == 6);
  }
}

TEST_SUITE("Notify") {
  TEST_CASE("a waiter on a dead server gets ConnectionError at once, not after the confirmation time") {
    dlock::SingleOptions options;
    options.connection.port = dlock::test::freeLoopbackPort();
    options.connection.connectTimeout = 100ms;
    dlock::SingleOperator backend(options);
    const auto start = Steady::now();
    CHECK_THROWS_AS((void)backend.watch("k"), dlock::ConnectionError);
    CHECK(Steady::now() - start < 1500ms);  // the confirmation allowance is 2 s before any connect
  }
}

TEST_SUITE("Notify") {
  TEST_CASE("a refused subscription fails that watch only, typed, and a later watch asks again") {
    RedisProcess::Options options;
    options.config = {"user limited on >pw ~* &dlock:{allowed}* +@all"};
    RedisProcess server(options);
    auto backend = dlock::connect("redis://limited:pw@" + server.host() + ":" + std::to_string(server.port()));
    auto allowed = backend->watch("allowed");  // subscribed
    REQUIRE(allowed != nullptr);
    try {
      (void)backend->watch("denied");
      FAIL("SUBSCRIBE to a channel the ACL denies must fail");
    } catch (const dlock::BackendError& error) {
      CHECK(std::string(error.what()).find("NOPERM") != std::string::npos);
    }
    // The refusal was that channel's alone, and a second watch asks the server again.
    CHECK_THROWS_AS((void)backend->watch("denied"), dlock::BackendError);
    RedisClient admin(server.host(), server.port());
    admin.ok({"ACL", "SETUSER", "limited", "allchannels"});
    CHECK(backend->watch("denied") != nullptr);
  }
}
