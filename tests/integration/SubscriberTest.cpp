// SPDX-License-Identifier: Apache-2.0
// The release subscriber on a real server: its keep-alive, and what its waiters hear around a
// lost connection.
#include <doctest/doctest.h>

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "LinkProxy.h"
#include "LogCapture.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "ThreadState.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/single/SingleOperator.h"

using namespace std::chrono_literals;
using dlock::test::LogCapture;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::LinkProxy;
using Steady = std::chrono::steady_clock;

namespace {

// Polls `condition` every 10 ms; false when `budget` passed first.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds budget) {
  const auto deadline = Steady::now() + budget;
  while (!condition()) {
    if (Steady::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

double seconds(Steady::duration duration) { return std::chrono::duration<double>(duration).count(); }

// Subscribers of a key's release channel and of its waiters' wake-up channels (PUBSUB NUMSUB).
long long subscribers(RedisClient& client, const std::string& key) { return dlock::test::releaseSubscribers(client, key); }

// An operator that passes every call to `inner`, counting acquire attempts and the waiters
// parked on a release watch.
class ObservedOperator final : public dlock::IOperator, public dlock::IFenceRaiser, public dlock::ILeaseInspector {
 public:
  explicit ObservedOperator(std::shared_ptr<dlock::IOperator> inner) : inner_(std::move(inner)) {}

  std::atomic<int> attempts{0};
  std::atomic<int> parked{0};  // waiters inside waitForRelease() now

  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    ++attempts;
    return inner_->lock(key, token, ttl);
  }
  dlock::ReleaseResult unlock(std::string_view key, std::string_view token) override {
    return inner_->unlock(key, token);
  }
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    return inner_->extend(key, token, ttl);
  }
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override {
    return inner_->raiseFence(key, atLeast);
  }
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override {
    return std::make_unique<Watch>(inner_->watch(key), parked);
  }
  dlock::LeaseInfo inspect(std::string_view key) override { return inner_->inspect(key); }
  [[nodiscard]] std::string describe() const override { return inner_->describe(); }

 private:
  class Watch final : public dlock::IReleaseWatch {
   public:
    Watch(std::unique_ptr<dlock::IReleaseWatch> inner, std::atomic<int>& parked)
        : inner_(std::move(inner)), parked_(parked) {}
    bool waitForRelease(std::chrono::milliseconds timeout) override {
      ++parked_;
      const bool released = inner_->waitForRelease(timeout);
      --parked_;
      return released;
    }

   private:
    const std::unique_ptr<dlock::IReleaseWatch> inner_;
    std::atomic<int>& parked_;
  };

  const std::shared_ptr<dlock::IOperator> inner_;
};

}  // namespace

TEST_SUITE("Subscriber") {
  TEST_CASE("a release while the subscriber re-subscribes after a lost connection wakes its waiters") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    // Long enough that a missed release shows as a timeout, not as a slow hand-off: the waiters
    // recheck every 30 s and the holder's lease lasts 30 s.
    constexpr auto kLong = 30s;
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(kLong).build();
    // Two locks on one operator through the proxy: two waiters on one channel of one subscriber.
    const auto backend = std::make_shared<ObservedOperator>(dlock::connect(proxy.uri()));
    const auto notify = std::make_shared<dlock::NotifyWait>(kLong);
    std::vector<std::shared_ptr<dlock::ILock>> waiters;
    for (int i = 0; i < 2; ++i) {
      waiters.push_back(dlock::LockBuilder().backend(backend).waitStrategy(notify).leaseTime(kLong).build());
    }

    REQUIRE(holder->tryLock("k"));
    std::atomic<int> acquired{0};
    std::vector<Steady::time_point> acquiredAt(waiters.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < waiters.size(); ++i) {
      threads.emplace_back([&, i] {
        if (!waiters[i]->tryLock("k", 2 * kLong)) return;
        acquiredAt[i] = Steady::now();
        ++acquired;
        waiters[i]->unlock("k");  // the other waiter's turn
      });
    }
    REQUIRE(eventually([&] { return backend->parked == 2; }, 10s));
    REQUIRE(subscribers(admin, "k") == 1);
    const int attemptsBefore = backend->attempts;

    // The subscriber's connection dies; what it sends on the next one is held back by the proxy:
    // its SUBSCRIBE, and the PING it adds after a second without replies. The window has then
    // lasted that second, and a release in it reaches nobody.
    proxy.holdClientsSending("SUBSCRIBE");  // after the connect handshake, which the server answers
    REQUIRE(admin.ok({"CLIENT", "KILL", "TYPE", "pubsub"}).integer == 1);
    REQUIRE(proxy.waitForHeld("SUBSCRIBE", 10s));
    REQUIRE(proxy.waitForHeld("PING", 10s));
    const auto releasedAt = Steady::now();
    holder->unlock("k");
    CHECK(subscribers(admin, "k") == 0);
    // Nobody retried yet: a retry now would be answered "held", then miss the release.
    CHECK(backend->attempts.load() == attemptsBefore);
    proxy.release();

    for (auto& thread : threads) thread.join();
    REQUIRE(acquired == 2);
    // Far less than the 30 s a lost wake-up costs: the waiters retried once subscribed again.
    for (const auto at : acquiredAt) CHECK(seconds(at - releasedAt) < 10.0);
  }

  TEST_CASE("a waiter whose server dies is woken to retry at once, not after its recheck bound, and rides out the outage") {
    RedisProcess server;
    constexpr auto kLong = 30s;  // the recheck bound and the holder's lease
    auto holder = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(kLong).build();
    const auto backend = std::make_shared<ObservedOperator>(dlock::connect(server.uri()));
    auto waiter = dlock::LockBuilder()
                      .backend(backend)
                      .waitStrategy(std::make_shared<dlock::NotifyWait>(kLong))
                      .leaseTime(kLong)
                      .build();
    REQUIRE(holder->tryLock("k"));
    std::atomic<bool> acquired{false};
    std::thread thread([&] {
      try {
        acquired = waiter->tryLock("k", 2 * kLong);
        if (acquired) waiter->unlock("k");
      } catch (const dlock::ConnectionError&) {
      }
    });
    REQUIRE(eventually([&] { return backend->parked == 1; }, 10s));
    const int attemptsBefore = backend->attempts;
    server.kill();  // the subscriber cannot reconnect: its first failed attempt wakes the waiter
    // Woken long before the 30 s recheck bound, it tries again (and keeps retrying the outage).
    CHECK(eventually([&] { return backend->attempts > attemptsBefore + 1; }, 10s));
    server.restart();  // empty: the holder's lease went with the data, and the waiter takes the key
    thread.join();
    CHECK(acquired);
    CHECK(waiter->stats().outageRetries > 0);
  }

  TEST_CASE("a watch after a reconnect waits for that connection's answer, not the refusal of the one before") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy proxy(server.host(), server.port());
    const auto backend = dlock::connect(proxy.uri());
    const auto watching = backend->watch("k");  // keeps the channel in the subscriber's table

    // The ACL takes the channel away: the subscriber's next SUBSCRIBE is refused, which wakes the
    // channel's waiters. Redis 7 drops a subscriber whose channels the ACL no longer allows;
    // another server may not, hence the kill.
    admin.ok({"ACL", "SETUSER", "default", "resetchannels"});
    (void)admin.ok({"CLIENT", "KILL", "TYPE", "pubsub"});
    REQUIRE(watching->waitForRelease(30s));

    // Allowed again, on a new connection whose SUBSCRIBE the proxy holds back: no answer yet.
    admin.ok({"ACL", "SETUSER", "default", "allchannels"});
    proxy.holdClientsSending("SUBSCRIBE");
    REQUIRE(admin.ok({"CLIENT", "KILL", "TYPE", "normal"}).integer >= 1);  // the refused one has no channel
    REQUIRE(proxy.waitForHeld("SUBSCRIBE", 10s));
    // The old refusal is not this connection's answer: the watch waits for one, and has none in time.
    CHECK_THROWS_AS((void)backend->watch("k"), dlock::ConnectionError);
    proxy.release();
    CHECK(backend->watch("k") != nullptr);
  }

  TEST_CASE("releases of one key do not wake a thread waiting for another key") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    auto backend = dlock::connect(server.uri());
    const auto busy = backend->watch("busy");  // subscribed on the same connection; nobody waits on it
    std::atomic<pid_t> waiterTid{0};
    std::atomic<long long> switchesBefore{0};
    std::atomic<long long> switchesAfter{0};
    std::atomic<bool> woken{false};
    std::thread waiter([&] {
      const auto quiet = backend->watch("quiet");
      switchesBefore = dlock::test::voluntarySwitches();
      waiterTid = static_cast<pid_t>(::gettid());
      woken = quiet->waitForRelease(30s);
      switchesAfter = dlock::test::voluntarySwitches();
    });
    REQUIRE(eventually([&] { return waiterTid != 0 && dlock::test::threadSleeping(waiterTid); }, 30s));
    // Each watch listens on its key's wake-up channel for this operator (`...:released:<listener>`).
    const auto wakeChannel = [&](const std::string& key) {
      return client.ok({"PUBSUB", "CHANNELS", "dlock:{" + key + "}:released:*"}).elements.at(0).str;
    };
    const std::string busyChannel = wakeChannel("busy");
    for (int i = 0; i < 200; ++i) client.ok({"PUBLISH", busyChannel, "1"});
    // Replies on one connection come in order: the subscriber has handled every message above
    // when it hears this one.
    client.ok({"PUBLISH", wakeChannel("quiet"), "1"});
    waiter.join();
    CHECK(woken);
    // Its own release, and a mutex it may have found held on the way out; not one per message.
    CHECK(switchesAfter - switchesBefore <= 5);
  }

  TEST_CASE("an idle subscriber answers its PINGs without reconnecting") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LogCapture log(spdlog::level::warn);
    dlock::SingleOptions options;
    options.connection.host = server.host();
    options.connection.port = server.port();
    dlock::SingleOperator backend(options);

    // Watched once, then by nobody: the channel lingers a while, then the subscriber drops it
    // and keeps its connection with no channel at all.
    (void)backend.watch("k");
    REQUIRE(subscribers(admin, "k") == 1);
    REQUIRE(eventually([&] { return subscribers(admin, "k") == 0; }, 30s));  // the linger is 5 s

    // It PINGs every second when idle; a PONG it does not recognise costs a reconnect each time.
    const long long before = admin.commandCalls()["ping"];
    REQUIRE(eventually([&] { return admin.commandCalls()["ping"] >= before + 3; }, 30s));
    CHECK(backend.reconnects() == 0);
    CHECK(log.text().find("release subscriber") == std::string::npos);
  }
}
