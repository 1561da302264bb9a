// SPDX-License-Identifier: Apache-2.0
// The default lock's release wakes one registered waiting process, not every waiter: waiters are
// worker processes (their own subscribers and listeners), the holder a bare operator whose
// release says how many subscribers its messages reached (ReleaseResult::notified), and the
// waiter registry (`dlock:{k}:waiters`, Scripts.h) is read from the server.
#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using Steady = std::chrono::steady_clock;

namespace {

constexpr const char* kHolder = "00000000000000000000000000000001";
constexpr auto kLongLease = 60s;  // no lease ends during a test: a waiter gets the key by a release

// The listeners of the live entries in a key's waiter registry (`listener=expiry-ms;`, expiry in
// the server's time; `listener=expiry-ms~;` once a release woke it), oldest first; only the woken
// ones when `woken`.
std::vector<std::string> registered(RedisClient& client, const std::string& key, bool woken = false) {
  const auto time = client.ok({"TIME"});
  const long long nowMs = std::stoll(time.elements.at(0).str) * 1000 + std::stoll(time.elements.at(1).str) / 1000;
  std::vector<std::string> listeners;
  std::istringstream entries(client.ok({"GET", "dlock:{" + key + "}:waiters"}).str);
  std::string entry;
  while (std::getline(entries, entry, ';')) {
    const auto equals = entry.find('=');
    const bool marked = entry.back() == '~';
    if (std::stoll(entry.substr(equals + 1)) > nowMs && (marked || !woken)) listeners.push_back(entry.substr(0, equals));
  }
  return listeners;
}

std::vector<std::string> woken(RedisClient& client, const std::string& key) { return registered(client, key, true); }

// A listener is "0", 17 digits, the pid, "." and the operator's number (GrantWatch.h, RedisOperator.cpp).
pid_t pidOf(const std::string& listener) {
  return static_cast<pid_t>(std::stol(listener.substr(18, listener.find('.') - 18)));
}

long long subscribers(RedisClient& client, const std::string& channel) {
  return client.ok({"PUBSUB", "NUMSUB", channel}).elements.at(1).integer;
}

std::unique_ptr<ChildProcess> waiterProcess(const RedisProcess& server, const std::string& key) {
  return std::make_unique<ChildProcess>(std::vector<std::string>{DLOCK_TEST_WORKER, "hold", server.uri(), key, "lease",
                                                                 std::to_string(std::chrono::milliseconds(kLongLease).count())});
}

bool acquiredLine(const std::optional<std::string>& line) { return line && line->rfind("acquired", 0) == 0; }

// `count` waiter processes for `key`, each registered before the next starts: the registry lists
// them in this order.
std::vector<std::unique_ptr<ChildProcess>> registeredWaiters(const RedisProcess& server, RedisClient& admin,
                                                             const std::string& key, std::size_t count) {
  std::vector<std::unique_ptr<ChildProcess>> waiters;
  while (waiters.size() < count) {
    waiters.push_back(waiterProcess(server, key));
    REQUIRE(eventually([&] { return registered(admin, key).size() == waiters.size(); }));
  }
  for (std::size_t i = 0; i < count; ++i) REQUIRE(pidOf(registered(admin, key)[i]) == waiters[i]->pid());
  return waiters;
}

// Stops each waiter: its subscription stays, so a wake-up reaches it, and nobody acts on it yet.
void stopAll(const std::vector<std::unique_ptr<ChildProcess>>& waiters) {
  for (const auto& waiter : waiters) {
    waiter->signal(SIGSTOP);
    REQUIRE(eventually([&] { return dlock::test::processState(waiter->pid()) == 'T'; }));
  }
}

}  // namespace

TEST_SUITE("WakeOne") {
  TEST_CASE("a release wakes one waiting process, the longest registered, the others get the key in turn") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    auto waiters = registeredWaiters(server, admin, "k", 3);
    const std::vector<std::string> before = registered(admin, "k");
    const dlock::ReleaseResult released = holder->unlock("k", kHolder);
    CHECK(released.released);
    CHECK(released.notified == 1);  // one process's subscriber; every waiter's, before (3)
    // Each waiter gets the key in turn, each release waking the next: none is left behind.
    for (std::size_t done = 0; done < waiters.size(); ++done) {
      ChildProcess* owner = nullptr;
      REQUIRE(eventually([&] {
        for (auto& waiter : waiters) {
          if (waiter && acquiredLine(waiter->readLine(20ms))) owner = waiter.get();
        }
        return owner != nullptr;
      }));
      // The oldest got it, and its entry went; the others keep theirs, in order (renewals keep
      // the place), none of them woken.
      CHECK(pidOf(before[done]) == owner->pid());
      CHECK(registered(admin, "k") == std::vector<std::string>(before.begin() + static_cast<std::ptrdiff_t>(done) + 1, before.end()));
      CHECK(woken(admin, "k").empty());
      owner->writeLine("unlock");
      CHECK(owner->readLine() == std::optional<std::string>("unlocked"));
      for (auto& waiter : waiters) {
        if (waiter.get() == owner) waiter.reset();
      }
    }
    CHECK(registered(admin, "k").empty());
  }

  TEST_CASE("a killed waiter's entry is passed over: the release wakes the next live one") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    auto dead = waiterProcess(server, "k");
    REQUIRE(eventually([&] { return registered(admin, "k").size() == 1; }));
    auto live = waiterProcess(server, "k");
    REQUIRE(eventually([&] { return registered(admin, "k").size() == 2; }));
    const std::string deadListener = registered(admin, "k").front();
    REQUIRE(pidOf(deadListener) == dead->pid());
    dead->signal(SIGKILL);
    (void)dead->wait();
    // The server has seen its subscriber go: its entry, still the oldest, names a channel nobody hears.
    REQUIRE(eventually([&] { return subscribers(admin, "dlock:{k}:released:" + deadListener) == 0; }));
    REQUIRE(registered(admin, "k").front() == deadListener);
    CHECK(holder->unlock("k", kHolder).notified == 1);
    CHECK(acquiredLine(live->readLine()));
    CHECK(registered(admin, "k").empty());  // the dead entry dropped, the live one woken
  }

  TEST_CASE("a woken waiter whose try lost the key to a newcomer keeps its place and is the next one woken") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    auto newcomer = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    const auto waiters = registeredWaiters(server, admin, "k", 2);
    ChildProcess* first = waiters[0].get();
    ChildProcess* second = waiters[1].get();
    const std::vector<std::string> order = registered(admin, "k");
    // Both stopped, so that the newcomer's try lands before any of theirs: the wake-up waits in
    // the first one's subscription.
    stopAll(waiters);
    CHECK(holder->unlock("k", kHolder).notified == 1);
    CHECK(woken(admin, "k") == std::vector<std::string>{order.front()});
    REQUIRE(newcomer->lock("k", "00000000000000000000000000000002", kLongLease).acquired);
    first->signal(SIGCONT);
    second->signal(SIGCONT);
    // The first one's try found the key taken and renewed its entry, in place (no longer marked).
    REQUIRE(eventually([&] { return woken(admin, "k").empty(); }));
    CHECK(registered(admin, "k") == order);
    // The newcomer's release wakes the first one again, and only it.
    CHECK(newcomer->unlock("k", "00000000000000000000000000000002").notified == 1);
    CHECK(acquiredLine(first->readLine()));
    CHECK(registered(admin, "k") == std::vector<std::string>{order.back()});
    CHECK(woken(admin, "k").empty());  // the second was not woken
    first->writeLine("unlock");
    CHECK(first->readLine() == std::optional<std::string>("unlocked"));
    CHECK(acquiredLine(second->readLine()));
  }

  TEST_CASE("a process whose waiter got the key while another of its waiters listens goes behind the other processes") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    // Two locks of this process on one operator: one listener, and its entry kept while either waits.
    auto backend = dlock::connect(server.uri());
    const auto lockOf = [&] {
      return dlock::LockBuilder().backend(backend).waitStrategy(std::make_shared<dlock::NotifyWait>(kLongLease))
          .leaseTime(kLongLease).build();
    };
    std::shared_ptr<dlock::ILock> locks[] = {lockOf(), lockOf()};
    std::atomic<int> holding{-1};
    std::atomic<bool> unlock[] = {false, false};
    std::vector<std::thread> threads;
    struct Joined {  // a failed check still ends the threads: each unlocks once it got the key
      std::vector<std::thread>& threads;
      std::atomic<bool>* unlock;
      ~Joined() {
        unlock[0] = unlock[1] = true;
        for (auto& thread : threads) thread.join();
      }
    } joined{threads, unlock};
    const auto evals = [&] { return admin.commandCalls()["evalsha"]; };
    const long long before = evals();
    for (int i = 0; i < 2; ++i) {
      threads.emplace_back([&, i] {
        locks[i]->lock("k");
        holding = i;
        while (!unlock[i]) std::this_thread::sleep_for(1ms);
        holding = -1;
        locks[i]->unlock("k");
      });
      // Each waiter's first try, then the one after it listens (NotifyWait rechecks after a minute).
      REQUIRE(eventually([&] { return evals() >= before + 2 * (i + 1); }));
    }
    auto other = waiterProcess(server, "k");
    REQUIRE(eventually([&] { return registered(admin, "k").size() == 2; }));
    const std::vector<std::string> order = registered(admin, "k");
    REQUIRE(pidOf(order.front()) == ::getpid());
    REQUIRE(pidOf(order.back()) == other->pid());
    CHECK(holder->unlock("k", kHolder).notified == 1);
    REQUIRE(eventually([&] { return holding >= 0; }));
    const int first = holding;
    // This process's entry went behind the other process's, for its second waiter.
    CHECK(eventually([&] { return registered(admin, "k") == std::vector<std::string>{order.back(), order.front()}; }));
    unlock[first] = true;
    CHECK(acquiredLine(other->readLine()));  // woken next, before this process's second waiter
    CHECK(holding == -1);
    other->writeLine("unlock");
    CHECK(other->readLine() == std::optional<std::string>("unlocked"));
    REQUIRE(eventually([&] { return holding == 1 - first; }));
  }

  TEST_CASE("a woken waiter that does not try is passed over by the next release") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    const auto waiters = registeredWaiters(server, admin, "k", 2);
    ChildProcess* stuck = waiters[0].get();
    ChildProcess* live = waiters[1].get();
    const std::vector<std::string> order = registered(admin, "k");
    stopAll(waiters);
    CHECK(holder->unlock("k", kHolder).notified == 1);
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);  // a newcomer, before any woken try
    // The stuck head was woken once; this release wakes the next one, not the stuck one again.
    CHECK(holder->unlock("k", kHolder).notified == 1);
    CHECK(woken(admin, "k") == order);
    live->signal(SIGCONT);
    CHECK(acquiredLine(live->readLine()));
    CHECK(registered(admin, "k") == std::vector<std::string>{order.front()});
    stuck->signal(SIGKILL);
  }

  TEST_CASE("a stopped waiter's entry ends with its registration, a live waiter's lasts") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    auto stopped = waiterProcess(server, "k");
    REQUIRE(eventually([&] { return registered(admin, "k").size() == 1; }));
    auto live = waiterProcess(server, "k");
    REQUIRE(eventually([&] { return registered(admin, "k").size() == 2; }));
    const std::vector<std::string> both = registered(admin, "k");
    REQUIRE(pidOf(both.front()) == stopped->pid());
    stopped->signal(SIGSTOP);  // its subscription stays: a wake-up sent to it would reach nobody who acts
    REQUIRE(eventually([&] { return dlock::test::processState(stopped->pid()) == 'T'; }));
    // Its entry ends 30 s after its last try (the registration); the live waiter's tries renew its own.
    CHECK(eventually([&] { return registered(admin, "k") == std::vector<std::string>{both.back()}; }, 2 * 30s));
    CHECK(holder->unlock("k", kHolder).notified == 1);
    CHECK(acquiredLine(live->readLine()));
    stopped->signal(SIGKILL);
  }

  TEST_CASE("a waiter whose wake-up is lost gets the key at its recheck, long before the holder's lease ends") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto holder = dlock::connect(server.uri());
    REQUIRE(holder->lock("k", kHolder, kLongLease).acquired);
    // A release watch rechecks after a minute on its own; the lock's registered waiter every 10 s.
    auto waiter = dlock::LockBuilder()
                      .backend(dlock::connect(server.uri()))
                      .waitStrategy(std::make_shared<dlock::NotifyWait>(kLongLease))
                      .leaseTime(kLongLease)
                      .build();
    bool acquired = false;
    Steady::time_point acquiredAt;
    std::thread waiting([&] {
      acquired = waiter->tryLock("k", 45s);
      acquiredAt = Steady::now();
      if (acquired) waiter->unlock("k");
    });
    REQUIRE(eventually([&] { return registered(admin, "k").size() == 1; }));
    admin.ok({"DEL", "dlock:{k}:waiters"});  // as if the wake-up were lost on its way
    const auto releasedAt = Steady::now();
    CHECK(holder->unlock("k", kHolder).notified == 0);
    waiting.join();
    REQUIRE(acquired);
    // The recheck is 10 s (DefaultAttempt::kRecheck): three of them is a busy machine; without it the
    // waiter would sleep to its deadline (45 s) and take the key at its last try.
    CHECK(acquiredAt - releasedAt < 30s);
  }

  TEST_CASE("an uncontended lock and unlock make ten server calls, as before the registry") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).leaseTime(kLongLease).build();
    REQUIRE(lock->tryLock("k"));  // loads the scripts
    lock->unlock("k");
    const auto callsInScripts = [&] {
      long long calls = 0;
      for (const auto& [command, count] : admin.commandCalls()) {
        if (command != "evalsha" && command != "eval" && command != "info" && command != "script") calls += count;
      }
      return calls;
    };
    const long long before = callsInScripts();
    constexpr int kCycles = 20;
    for (int i = 0; i < kCycles; ++i) {
      REQUIRE(lock->tryLock("k"));
      lock->unlock("k");
    }
    // acquire: EXISTS, INCR, TIME, SET, SET; release: MGET, PTTL, PUBLISH, SET (the record), DEL.
    CHECK(callsInScripts() - before == 10 * kCycles);
  }
}
