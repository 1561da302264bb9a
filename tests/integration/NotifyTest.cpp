// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using dlock::test::releaseSubscribers;
using Steady = std::chrono::steady_clock;

namespace {

// Leases, and the waiter's recheck of a held key, far longer than the waits and bounds below: a
// waiter that gets the key soon after its release was woken by the release message, nothing else.
constexpr auto kLongLease = 60s;
constexpr auto kWaitFor = 20s;      // a waiter's tryLock; a lost release message makes it time out
constexpr auto kHandOffBound = 5s;  // release to acquisition: a round trip, stretched by a busy machine

// Two locks on two operators: as two processes would be (separate connections and subscribers).
struct TwoClients {
  RedisProcess server;
  RedisClient admin{server.host(), server.port()};
  std::shared_ptr<dlock::ILock> holder =
      dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(kLongLease).build();
  std::shared_ptr<dlock::ILock> waiter = dlock::LockBuilder()
                                             .backend(dlock::connect(server.uri()))
                                             .leaseTime(kLongLease)
                                             .waitStrategy(std::make_shared<dlock::NotifyWait>(kLongLease))
                                             .build();

  // True once the waiter lock has made `attempts` attempts in all, listens for the release of
  // `key` and is registered for it: a waiter attempts, subscribes, attempts again (registering),
  // then sleeps; a key waited for lately, it subscribes before its first attempt.
  bool waiterAsleep(const std::string& key, std::uint64_t attempts) {
    return waiter->stats().attempts >= attempts && releaseSubscribers(admin, key) >= 1 &&
           dlock::test::waiterRegistered(admin, key);
  }
};

}  // namespace

TEST_SUITE("Notify") {
  TEST_CASE("a waiter acquires right after the release, long before the lease would end") {
    TwoClients c;
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<bool> acquired{false};
    Steady::time_point acquiredAt;
    std::thread waiter([&] {
      acquired = c.waiter->tryLock("k", kWaitFor);
      acquiredAt = Steady::now();
      if (acquired) c.waiter->unlock("k");
    });
    CHECK(eventually([&] { return c.waiterAsleep("k", 2); }));
    const auto releasedAt = Steady::now();
    c.holder->unlock("k");
    waiter.join();
    REQUIRE(acquired);
    // The waiter rechecks only after a minute; the lease lasts a minute too.
    CHECK(acquiredAt - releasedAt < kHandOffBound);
  }

  TEST_CASE("a waiter whose holder dies without releasing acquires once the lease ends") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto waiter = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).build();
    // A holder that vanished: its key expires in 1.5 s and nobody will publish a release.
    constexpr auto kDeadLease = 1500ms;
    const auto start = Steady::now();  // before the SET: the key cannot expire before start + kDeadLease
    client.ok({"SET", "dlock:{k}", "dead-holder", "PX", std::to_string(kDeadLease.count())});
    REQUIRE(waiter->tryLock("k", kDeadLease * 40));
    const auto waited = Steady::now() - start;
    CHECK(waited >= kDeadLease - 10ms);  // Redis keeps expiry times in whole milliseconds
    CHECK(waited < kDeadLease * 10);     // soon after the lease, far from the tryLock timeout
    waiter->unlock("k");
  }

  TEST_CASE("waiters keep working after the server restarts under the subscriber") {
    TwoClients c;
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<bool> first{false};
    std::thread waiter([&] {
      first = c.waiter->tryLock("k", kWaitFor);
      if (first) c.waiter->unlock("k");
    });
    CHECK(eventually([&] { return c.waiterAsleep("k", 2); }));
    c.holder->unlock("k");
    waiter.join();
    REQUIRE(first);

    c.server.restart();  // the subscriber's connection dies; the keys are gone too
    // The first call on each pooled connection may meet the dead socket; run() retries once.
    REQUIRE(c.holder->tryLock("k"));
    RedisClient admin(c.server.host(), c.server.port());
    std::atomic<bool> second{false};
    Steady::time_point acquiredAt;
    const auto attemptsBefore = c.waiter->stats().attempts;
    std::thread again([&] {
      second = c.waiter->tryLock("k", kWaitFor);
      acquiredAt = Steady::now();
      if (second) c.waiter->unlock("k");
    });
    // The subscriber has reconnected and subscribed again, and the waiter sleeps on it.
    CHECK(eventually([&] {
      return c.waiter->stats().attempts >= attemptsBefore + 1 && releaseSubscribers(admin, "k") >= 1 &&
             dlock::test::waiterRegistered(admin, "k");
    }));
    const auto releasedAt = Steady::now();
    c.holder->unlock("k");
    again.join();
    REQUIRE(second);
    CHECK(acquiredAt - releasedAt < kHandOffBound);
  }

  TEST_CASE("threads of one process queue for a key: one talks to Redis, all get it in turn") {
    TwoClients c;
    RedisClient client(c.server.host(), c.server.port());
    REQUIRE(c.holder->tryLock("k"));
    std::atomic<int> acquired{0};
    std::vector<std::thread> waiters;
    constexpr int kWaiters = 6;
    for (int i = 0; i < kWaiters; ++i) {
      waiters.emplace_back([&] {
        if (c.waiter->tryLock("k", kWaitFor)) {
          ++acquired;
          c.waiter->unlock("k");
        }
      });
    }
    // Each waiter attempted once and queued; the head once more after subscribing.
    CHECK(eventually([&] { return c.waiterAsleep("k", kWaiters + 1); }));
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
    // Lazily: connect() would refuse a user denied dlock's channels, naming them.
    auto backend =
        dlock::connect("redis://limited:pw@" + server.host() + ":" + std::to_string(server.port()) + "?lazy_connect=true");
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
