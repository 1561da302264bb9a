// SPDX-License-Identifier: Apache-2.0
// The fair lock against a real redis-server: FIFO across threads with their own connections,
// dead and timed-out waiters, a hand-off that raced a timeout, a lost message, fencing, TTLs; and
// the FIFO check seen failing on a broken fair release (broken/FairReleaseToNewest.h).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ForkedChild.h"
#include "ForkedIncrements.h"
#include "PausedHeir.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "ThreadState.h"
#include "broken/FairReleaseToNewest.h"
#include "dlock/IFairOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;

namespace {

const std::string kDead(32, 'd');

std::shared_ptr<dlock::ILock> fairLock(const RedisProcess& server, std::chrono::milliseconds waiterLease = 5s) {
  return dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(10s).fair().waiterLease(waiterLease).build();
}

dlock::IFairOperator& fairOf(const std::shared_ptr<dlock::IOperator>& backend) {
  return dynamic_cast<dlock::IFairOperator&>(*backend);
}

long long queueLength(RedisClient& client, const std::string& key) {
  return client.ok({"LLEN", "dlock:{" + key + "}:fair:queue"}).integer;
}

// A server, a client that looks at its keys, and the fair operator under test.
struct FairServer {
  RedisProcess server;
  RedisClient client{server.host(), server.port()};
  std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
  dlock::IFairOperator& fair = fairOf(backend);
};

constexpr int kWaiters = 8;

std::vector<int> ascending(int count) {
  std::vector<int> numbers;
  for (int i = 0; i < count; ++i) numbers.push_back(i);
  return numbers;
}

// The order in which kWaiters waiters got "fifo", and every holder's fencing token (the first
// holder's first).
struct QueuedOrder {
  std::vector<int> order;
  std::vector<std::uint64_t> fences;
};

// A holder takes "fifo"; kWaiters waiters, each with its own connection, queue one after another
// (each in the server's queue before the next starts); the holder releases and each waiter
// releases in turn. Every lock's backend is `wrap(dlock::connect(...))`.
template <class Wrap>
QueuedOrder queuedOrder(const RedisProcess& server, RedisClient& client, const Wrap& wrap) {
  const auto build = [&] {
    return dlock::LockBuilder().backend(wrap(dlock::connect(server.uri()))).leaseTime(10s).fair().waiterLease(5s).build();
  };
  auto holder = build();
  holder->lock("fifo");
  std::mutex mutex;
  QueuedOrder got;
  got.fences.push_back(holder->fencingToken("fifo"));
  std::vector<std::thread> waiters;
  std::vector<std::shared_ptr<dlock::ILock>> locks;
  for (int i = 0; i < kWaiters; ++i) locks.push_back(build());
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      locks[static_cast<std::size_t>(i)]->lock("fifo");
      {
        std::lock_guard<std::mutex> guard(mutex);
        got.order.push_back(i);
        got.fences.push_back(locks[static_cast<std::size_t>(i)]->fencingToken("fifo"));
      }
      locks[static_cast<std::size_t>(i)]->unlock("fifo");
    });
    // Waiter i is in the server's queue before waiter i + 1 starts.
    REQUIRE(eventually([&] { return queueLength(client, "fifo") == i + 1; }));
  }
  holder->unlock("fifo");
  for (auto& waiter : waiters) waiter.join();
  return got;
}

// The server's clock in ms.
long long serverMillis(RedisClient& client) {
  const auto time = client.ok({"TIME"});
  return std::stoll(time.elements[0].str) * 1000 + std::stoll(time.elements[1].str) / 1000;
}

}  // namespace

TEST_SUITE("FairLockOnRedis") {
  TEST_CASE("8 waiters, each with its own connection, get the key in the order they queued") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const QueuedOrder got = queuedOrder(server, client, [](auto backend) { return backend; });
    CHECK(got.order == ascending(kWaiters));
    for (std::size_t i = 1; i < got.fences.size(); ++i) CHECK(got.fences[i] > got.fences[i - 1]);
    // Nothing left but the fencing counter and the release records, which have their TTLs.
    for (const auto& key : client.ok({"KEYS", "dlock:*"}).elements) {
      const bool kept = key.str == "dlock:{fifo}:fence" || key.str.rfind("dlock:{fifo}:released:", 0) == 0;
      CHECK_MESSAGE(kept, "left behind: " << key.str);
    }
    dlock::test::checkEveryLockKeyHasTtl(client);
  }

  TEST_CASE("the FIFO check above fails on a broken fair release that hands the key to the newest waiter") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    std::mutex rawMutex;
    RedisClient raw(server.host(), server.port());
    const dlock::test::broken::FairReleaseToNewest::NewestFirst newestFirst = [&](const std::string& queueKey) {
      const std::lock_guard<std::mutex> guard(rawMutex);
      (void)raw.ok({"EVAL", dlock::test::broken::kNewestFirst, "1", queueKey});
    };
    const QueuedOrder got = queuedOrder(server, client, [&](std::shared_ptr<dlock::IOperator> backend) {
      return std::make_shared<dlock::test::broken::FairReleaseToNewest>(std::move(backend), newestFirst);
    });
    CHECK(got.order != ascending(kWaiters));  // what the FIFO test checks, failing
    std::vector<int> newestFirstOrder = ascending(kWaiters);
    std::reverse(newestFirstOrder.begin(), newestFirstOrder.end());
    CHECK(got.order == newestFirstOrder);  // and the double does what it says
  }

  TEST_CASE("a waiter that died is skipped once its waiter lease ends") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    auto holder = fairLock(server);
    holder->lock("dead");
    // A waiter that queued with a 300 ms waiter lease and died: it never renews.
    const auto queued = fairOf(backend).fairLock("dead", kDead, 10s, 300ms);
    REQUIRE_FALSE(queued.acquired);
    std::atomic<bool> live{false};
    auto other = fairLock(server);
    std::thread waiter([&] {
      other->lock("dead");
      live = true;
      other->unlock("dead");
    });
    REQUIRE(eventually([&] { return queueLength(client, "dead") == 2; }));
    // The server's clock passes the dead waiter's lease (the event, not a sleep of our own).
    REQUIRE(eventually([&] { return serverMillis(client) > queued.backendMillis + 300; }));
    holder->unlock("dead");
    waiter.join();
    CHECK(live);
    CHECK(queueLength(client, "dead") == 0);
    CHECK(client.ok({"EXISTS", "dlock:{dead}"}).integer == 0);
  }

  TEST_CASE("a waiter handed the key just before it died holds it no longer than its place had left") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    auto holder = fairLock(server);
    holder->lock("claim");
    REQUIRE_FALSE(fairOf(backend).fairLock("claim", kDead, 10s, 500ms).acquired);
    holder->unlock("claim");  // handed to the dead waiter: a claim lease of at most 500 ms, not 10 s
    CHECK(client.ok({"GET", "dlock:{claim}"}).str == kDead);
    const long long claim = client.ok({"PTTL", "dlock:{claim}"}).integer;
    CHECK(claim > 0);
    CHECK(claim <= 500);
    CHECK(holder->tryLock("claim", 10s));  // once the claim ran out: the next attempt takes it
    holder->unlock("claim");
  }

  TEST_CASE("a timed-out waiter leaves the queue") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto holder = fairLock(server);
    auto other = fairLock(server);
    holder->lock("timeout");
    std::atomic<bool> got{true};
    std::thread([&] { got = other->tryLock("timeout", 200ms); }).join();
    CHECK_FALSE(got);
    CHECK(queueLength(client, "timeout") == 0);
    CHECK(client.ok({"EXISTS", "dlock:{timeout}:fair:leases"}).integer == 0);
    holder->unlock("timeout");
    CHECK(client.ok({"EXISTS", "dlock:{timeout}"}).integer == 0);
  }

  TEST_CASE_FIXTURE(FairServer, "a hand-off that raced the waiter's timeout is passed on, not leaked") {
    const std::string holder(32, 'a');
    const std::string late(32, 'b');
    const std::string next(32, 'c');
    REQUIRE(fair.fairLock("race", holder, 10s, 5s).acquired);
    REQUIRE_FALSE(fair.fairLock("race", late, 10s, 5s).acquired);
    REQUIRE_FALSE(fair.fairLock("race", next, 10s, 5s).acquired);
    REQUIRE(fair.fairUnlock("race", holder).notified == 1);  // handed to `late` ...
    CHECK(fair.leaveQueue("race", late, 10s));                // ... whose wait ended meanwhile
    CHECK(client.ok({"GET", "dlock:{race}"}).str == next);
    CHECK(fair.fairUnlock("race", next).released);
    CHECK(client.ok({"EXISTS", "dlock:{race}"}).integer == 0);
  }

  TEST_CASE_FIXTURE(FairServer, "an attempt that arrives after its waiter left for good is refused: no place, no key") {
    const std::string gone(32, 'g');
    CHECK_FALSE(fair.leaveQueue("late", gone, 10s));  // gave up (its attempt's reply was lost)
    const auto late = fair.fairLock("late", gone, 10s, 5s);  // that attempt reaches the server now
    CHECK_FALSE(late.acquired);
    CHECK(client.ok({"EXISTS", "dlock:{late}"}).integer == 0);
    CHECK(queueLength(client, "late") == 0);
    dlock::test::checkEveryLockKeyHasTtl(client);
  }

  TEST_CASE_FIXTURE(FairServer, "a release by a token that has a tombstone is not reported released") {
    const std::string gone(32, 'g');
    CHECK_FALSE(fair.leaveQueue("tomb", gone, 10s));  // left for good: the token's record is a tombstone
    const dlock::ReleaseResult release = fair.fairUnlock("tomb", gone);
    CHECK_FALSE(release.released);  // a tombstone is no evidence of a release
    CHECK_FALSE(release.releasedEarlier);
  }

  TEST_CASE_FIXTURE(FairServer, "a waiter whose hand-off message was lost finds itself owner at its recheck") {
    const std::string holder(32, 'a');
    const std::string waiter(32, 'b');
    REQUIRE(fair.fairLock("lost", holder, 10s, 5s).acquired);
    const auto queued = fair.fairLock("lost", waiter, 10s, 5s);
    REQUIRE_FALSE(queued.acquired);
    REQUIRE(fair.fairUnlock("lost", holder).notified == 1);  // nobody listened: the message is gone
    const auto recheck = fair.fairLock("lost", waiter, 10s, 5s);
    CHECK(recheck.acquired);
    CHECK(recheck.fencingToken > 0);
    CHECK(recheck.validity > 0ms);
    CHECK(fair.fairUnlock("lost", waiter).released);
    // The release is retried after a lost reply: decided by the server's record.
    const auto retried = fair.fairUnlock("lost", waiter);
    CHECK(retried.released);
    CHECK(retried.releasedEarlier);
  }

  TEST_CASE_FIXTURE(FairServer, "the hand-off message carries the fencing token, and the waiter owns the key when it arrives") {
    const std::string holder(32, 'a');
    const std::string waiter(32, 'b');
    const auto first = fair.fairLock("msg", holder, 10s, 5s);
    REQUIRE(first.acquired);
    REQUIRE_FALSE(fair.fairLock("msg", waiter, 10s, 5s).acquired);
    auto grants = fair.watchGrants("msg", waiter);
    REQUIRE(fair.fairUnlock("msg", holder).notified == 1);
    const dlock::Grant grant = grants->waitForGrant(30s);
    REQUIRE(grant.kind == dlock::Grant::Kind::Granted);
    CHECK(grant.fencingToken > first.fencingToken);
    CHECK(grant.lease > 0ms);  // the rest of its 5 s waiter lease, under its 10 s ttl
    CHECK(grant.lease <= 5s);
    CHECK(backend->extend("msg", waiter, 10s));
  }

  TEST_CASE_FIXTURE(FairServer, "a hand-off is published to the heir's process alone, on the channel its place names (a 0.2 place: the key's channel)") {
    const std::string holder(32, 'a');
    const std::string waiter(32, 'b');
    const std::string older(32, 'c');
    RedisClient watcher(server.host(), server.port());
    watcher.ok({"PSUBSCRIBE", "dlock:{heard}:fair:granted*"});
    REQUIRE(fair.fairLock("heard", holder, 10s, 5s).acquired);
    REQUIRE_FALSE(fair.fairLock("heard", waiter, 10s, 5s).acquired);
    // Behind it, the place of a 0.2 client: `token|ttl`, no listener.
    client.ok({"ZADD", "dlock:{heard}:fair:leases", std::to_string(serverMillis(client) + 5000), older + "|10000"});
    client.ok({"RPUSH", "dlock:{heard}:fair:queue", older + "|10000"});
    const std::string place = client.ok({"LINDEX", "dlock:{heard}:fair:queue", "0"}).str;
    REQUIRE(place.rfind(waiter + "|10000.0", 0) == 0);
    const std::string listener = place.substr(place.find('.') + 1);
    CHECK(listener.find_first_not_of("0123456789") == std::string::npos);
    CHECK(listener.substr(18) == std::to_string(::getpid()));  // "0", 17 random digits, the pid

    REQUIRE(fair.fairUnlock("heard", holder).notified == 1);
    const auto toWaiter = watcher.next();  // pmessage, pattern, channel, payload
    REQUIRE(toWaiter.elements.size() == 4);
    CHECK(toWaiter.elements[2].str == "dlock:{heard}:fair:granted:" + listener);
    CHECK(toWaiter.elements[3].str.rfind(waiter + "|", 0) == 0);
    CHECK(client.ok({"GET", "dlock:{heard}"}).str == waiter);

    REQUIRE(fair.fairUnlock("heard", waiter).notified == 1);
    const auto toOlder = watcher.next();
    REQUIRE(toOlder.elements.size() == 4);
    CHECK(toOlder.elements[2].str == "dlock:{heard}:fair:granted");
    CHECK(toOlder.elements[3].str.rfind(older + "|", 0) == 0);
    CHECK(client.ok({"GET", "dlock:{heard}"}).str == older);
    // Nothing else was published: the answer to a PING comes next.
    const auto pong = watcher.command({"PING"});
    REQUIRE(pong.elements.size() == 2);
    CHECK(pong.elements[0].str == "pong");
  }

  TEST_CASE_FIXTURE(FairServer, "a hand-off message for one waiter does not wake another waiter of the same process") {
    const std::string holder(32, 'a');
    const std::string waiter(32, 'b');
    REQUIRE(fair.fairLock("same", holder, 10s, 5s).acquired);
    REQUIRE_FALSE(fair.fairLock("same", waiter, 10s, 5s).acquired);
    const std::string place = client.ok({"LINDEX", "dlock:{same}:fair:queue", "0"}).str;
    const std::string channel = "dlock:{same}:fair:granted:" + place.substr(place.find('.') + 1);
    std::atomic<pid_t> waiterTid{0};
    std::atomic<long long> switches{-1};
    std::atomic<bool> granted{false};
    std::thread thread([&] {
      auto grants = fair.watchGrants("same", waiter);
      const long long before = dlock::test::voluntarySwitches();
      waiterTid = static_cast<pid_t>(::gettid());
      granted = grants->waitForGrant(30s).kind == dlock::Grant::Kind::Granted;
      switches = dlock::test::voluntarySwitches() - before;
    });
    REQUIRE(eventually([&] { return waiterTid != 0 && dlock::test::threadSleeping(waiterTid); }));
    // Hand-offs to other waiters of this process: the same channel, other tokens.
    for (int i = 0; i < 200; ++i) client.ok({"PUBLISH", channel, std::string(32, 'c') + "|1|1|1"});
    REQUIRE(fair.fairUnlock("same", holder).notified == 1);  // its own, after those
    thread.join();
    CHECK(granted);
    const long long blocked = switches;
    CHECK(blocked <= 5);  // its own message, and a mutex it may have found held; not one per message
  }

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt
  TEST_CASE_FIXTURE(FairServer, "a forked child's waiters get hand-offs on a channel of their own, not the parent's") {
    REQUIRE(fair.fairLock("child", std::string(32, 'a'), 10s, 5s).acquired);
    REQUIRE_FALSE(fair.fairLock("child", std::string(32, 'b'), 10s, 5s).acquired);
    dlock::test::ForkedChild child([&] { return fair.fairLock("child", std::string(32, 'c'), 10s, 5s).acquired ? 1 : 0; });
    const pid_t childPid = child.pid();
    REQUIRE(child.exitStatus(30s) == 0);
    const auto places = client.ok({"LRANGE", "dlock:{child}:fair:queue", "0", "-1"}).elements;
    REQUIRE(places.size() == 2);
    const std::string parentListener = places[0].str.substr(places[0].str.find('.') + 1);
    const std::string childListener = places[1].str.substr(places[1].str.find('.') + 1);
    CHECK(parentListener.substr(18) == std::to_string(::getpid()));
    CHECK(childListener.substr(18) == std::to_string(childPid));
    CHECK(childListener != parentListener);
  }
#endif

  TEST_CASE("reentrant on Redis, and the watchdog keeps a fair hold") {
    RedisProcess server;
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).fair().watchdogLease(300ms).build();
    lock->lock("re");
    CHECK(lock->tryLock("re", 0ms));
    const auto fence = lock->fencingToken("re");
    RedisClient client(server.host(), server.port());
    // Past two leases, still held: renewed (the event is the server's TTL rising again).
    long long lastTtl = client.ok({"PTTL", "dlock:{re}"}).integer;
    int rises = 0;
    REQUIRE(eventually([&] {
      const long long now = client.ok({"PTTL", "dlock:{re}"}).integer;
      if (now > lastTtl) ++rises;
      lastTtl = now;
      return rises >= 2;
    }));
    CHECK(lock->isHeld("re"));
    lock->unlock("re");
    CHECK(lock->isHeld("re"));
    CHECK(lock->fencingToken("re") == fence);
    lock->unlock("re");
    CHECK(client.ok({"EXISTS", "dlock:{re}"}).integer == 0);
  }

  TEST_CASE_FIXTURE(FairServer, "fair fencing tokens are exact across 2^53, taken and handed off, and a full counter refuses first") {
    const std::string a(32, 'a');
    const std::string b(32, 'b');
    constexpr std::uint64_t k2p53 = 9007199254740992ULL;
    // Just below 2^53 the counter's INCR reply is exact as a Lua number; from 2^53 it is read as text.
    (void)client.ok({"SET", "dlock:{f}:fence", std::to_string(k2p53 - 2)});
    std::uint64_t last = k2p53 - 2;
    for (int i = 0; i < 3; ++i) {
      const auto taken = fair.fairLock("f", a, 10s, 5s);  // taken by the acquire script
      REQUIRE(taken.acquired);
      CHECK(taken.fencingToken == last + 1);
      REQUIRE_FALSE(fair.fairLock("f", b, 10s, 5s).acquired);
      auto grants = fair.watchGrants("f", b);
      REQUIRE(fair.fairUnlock("f", a).notified == 1);  // handed off by the release script
      const dlock::Grant grant = grants->waitForGrant(30s);
      REQUIRE(grant.kind == dlock::Grant::Kind::Granted);
      CHECK(grant.fencingToken == last + 2);
      last = grant.fencingToken;
      REQUIRE(fair.fairUnlock("f", b).released);
    }
    CHECK(client.ok({"GET", "dlock:{f}:fence"}).str == std::to_string(last));
    CHECK(last > k2p53 + 1);
    (void)client.ok({"SET", "dlock:{f}:fence", std::to_string(dlock::kMaxFencingToken)});
    CHECK_THROWS_AS((void)fair.fairLock("f", a, 10s, 5s), dlock::BackendError);
    CHECK(client.ok({"EXISTS", "dlock:{f}"}).integer == 0);
  }

  TEST_CASE_FIXTURE(FairServer, "the queue's keys live as long as the longest waiter lease, and a new queue gets a TTL at once") {
    const std::string holder(32, 'h');
    const std::string patient(32, 'p');
    const std::string brief(32, 'q');
    const std::string queue = "dlock:{ttl}:fair:queue";
    const std::string leases = "dlock:{ttl}:fair:leases";
    REQUIRE(fair.fairLock("ttl", holder, 60s, 5s).acquired);
    REQUIRE_FALSE(fair.fairLock("ttl", brief, 60s, 2s).acquired);  // creates the queue
    for (const auto& name : {queue, leases}) {
      const long long ttl = client.ok({"PTTL", name}).integer;
      CHECK(ttl > 0);
      CHECK(ttl <= 2000);
    }
    REQUIRE_FALSE(fair.fairLock("ttl", patient, 60s, 40s).acquired);  // raises it
    REQUIRE_FALSE(fair.fairLock("ttl", brief, 60s, 2s).acquired);     // renews, and must not lower it
    for (const auto& name : {queue, leases}) CHECK(client.ok({"PTTL", name}).integer > 30000);
    CHECK(queueLength(client, "ttl") == 2);  // a renewal keeps its place: no second entry
  }

  TEST_CASE_FIXTURE(FairServer, "after 1000 keys taken, waited for and released, no key is left without a TTL") {
    const std::string a(32, 'a');
    const std::string b(32, 'b');
    for (int i = 0; i < 1000; ++i) {
      const std::string key = "many:" + std::to_string(i);
      REQUIRE(fair.fairLock(key, a, 10s, 5s).acquired);
      REQUIRE_FALSE(fair.fairLock(key, b, 10s, 5s).acquired);
      if (i % 3 == 0) {
        (void)fair.fairUnlock(key, a);  // handed to b, who keeps it
      } else if (i % 3 == 1) {
        (void)fair.leaveQueue(key, b, 10s);  // b gives up; a keeps it
      }  // else both stay: a holds, b waits
    }
    dlock::test::checkEveryLockKeyHasTtl(client);
    CHECK(client.ok({"DBSIZE"}).integer > 1000);
  }

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt
  TEST_CASE("a fair lock inherited across fork(): 4 children x 200 locked increments through it end exact, 3 rounds") {
    RedisProcess server;
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
    auto lock = dlock::LockBuilder().backend(backend).fair().build();
    dlock::test::exerciseBeforeFork(*lock, "fair-fork");
    dlock::test::checkForkedIncrements(lock, backend, "fair-fork", server, 3, 4, 200, 60s);
    REQUIRE(lock->tryLock("fair-fork", 5s));  // the parent is unaffected
    lock->unlock("fair-fork");
  }
#endif
}

TEST_SUITE("FairLockOnRedis") {
  TEST_CASE("a waiter paused past its hand-off's claim does not return from lock() while another process holds the key") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    dlock::test::checkPausedHeirWaitsItsTurn(DLOCK_TEST_WORKER, server.uri(), "f", client);
  }
}
