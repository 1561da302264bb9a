// SPDX-License-Identifier: Apache-2.0
// A lock and its backend inherited across fork() (a pre-fork server, a daemon forking workers):
// in the child they work as if new, and the parent's holds stay the parent's.
#include <doctest/doctest.h>

#if DLOCK_TEST_FORK_WITH_THREADS  // see tests/CMakeLists.txt

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ForkedChild.h"
#include "ForkedIncrements.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::exerciseBeforeFork;
using dlock::test::ForkedChild;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// Child exit codes, so a failing test says which step failed in the child.
enum Step : int {
  kDone = 0,
  kIncrementFailed = 10,
  kInheritedHeld,
  kInheritedCount,
  kInheritedUnlock,
  kInheritedLeaseHeld,
  kInheritedLeaseRelease,
  kNotAcquired,
  kKeyExpired,
  kTakenByOther,
  kNotHeldAnyMore,
  kUnlockFailed,
  kHandlerNotCalled,
};

// A lock whose watchdog renews every third of `watchdogLease`.
std::shared_ptr<dlock::ILock> makeLock(const std::string& uri, std::chrono::milliseconds watchdogLease = 30s) {
  return dlock::LockBuilder().backend(dlock::connect(uri)).watchdogLease(watchdogLease).build();
}

// The lease left on `key`'s lock, in ms (-2: no such key).
long long pttl(RedisClient& client, const std::string& key) {
  return client.ok({"PTTL", "dlock:{" + key + "}"}).integer;
}

}  // namespace

TEST_SUITE("Fork") {
  TEST_CASE("a lock inherited across fork(): 4 children x 500 locked increments through it end exact, 10 rounds") {
    RedisProcess server;
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
    auto lock = dlock::LockBuilder().backend(backend).build();
    exerciseBeforeFork(*lock, "fork-counter-lock");
    dlock::test::checkForkedIncrements(lock, backend, "fork-counter-lock", server, 10, 4, 500, 60s);
    // The parent is unaffected.
    REQUIRE(lock->tryLock("fork-counter-lock", 5s));
    lock->unlock("fork-counter-lock");
  }

  TEST_CASE("a child holding a key through an inherited lock keeps it renewed: another client never gets it") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    constexpr auto kLease = 600ms;  // renewed every 200 ms
    auto lock = makeLock(server.uri(), kLease);
    exerciseBeforeFork(*lock, "fork-renewed");

    ForkedChild child([&] {
      RedisClient own(server.host(), server.port());
      auto other = makeLock(server.uri(), kLease);  // another client, made in the child
      if (!lock->tryLock("fork-renewed", 5s)) return kNotAcquired;
      // Wait for 5 renewals (the lease's PTTL going up), each checked from the other client.
      long long last = pttl(own, "fork-renewed");
      for (int renewals = 0; renewals < 5;) {
        const long long now = pttl(own, "fork-renewed");
        if (now < 0) return kKeyExpired;
        if (other->tryLock("fork-renewed")) return kTakenByOther;
        if (!lock->isHeld("fork-renewed")) return kNotHeldAnyMore;
        if (now > last) ++renewals;
        last = now;
        std::this_thread::sleep_for(10ms);
      }
      try {
        lock->unlock("fork-renewed");
      } catch (const dlock::LockError&) {
        return kUnlockFailed;
      }
      return kDone;
    });
    // 5 renewals take 5 intervals; the child fails at once when the key expires.
    CHECK(child.exitStatus(20 * kLease + 10s) == kDone);
    CHECK(pttl(client, "fork-renewed") == -2);
  }

  TEST_CASE("the lost-lease handler given before fork() hears of a lease the child loses") {
    RedisProcess server;
    constexpr auto kLease = 600ms;  // renewed every 200 ms
    auto lock = makeLock(server.uri(), kLease);
    struct Heard {
      std::mutex mutex;
      std::condition_variable changed;
      bool lost = false;  // guarded by mutex
    };
    auto heard = std::make_shared<Heard>();
    lock->onLockLost([heard](std::string_view, std::uint64_t) {
      const std::lock_guard<std::mutex> guard(heard->mutex);
      heard->lost = true;
      heard->changed.notify_all();
    });
    exerciseBeforeFork(*lock, "fork-lost");

    ForkedChild child([&] {
      if (!lock->tryLock("fork-lost", 5s)) return kNotAcquired;
      RedisClient own(server.host(), server.port());
      own.ok({"SET", "dlock:{fork-lost}", "another-owner", "PX", "60000"});  // taken from under us
      std::unique_lock<std::mutex> guard(heard->mutex);
      // The child's watchdog finds the key gone at its next renewal, a third of the lease away.
      return heard->changed.wait_for(guard, 20 * kLease, [&] { return heard->lost; }) ? kDone : kHandlerNotCalled;
    });
    CHECK(child.exitStatus(20 * kLease + 10s) == kDone);
  }

  TEST_CASE("destroying an inherited lock and its backend in the child returns at once") {
    RedisProcess server;
    constexpr auto kLease = 2s;
    auto backend = dlock::connect(server.uri());
    auto lock = dlock::LockBuilder().backend(backend).watchdogLease(kLease).build();
    exerciseBeforeFork(*lock, "fork-teardown");

    SUBCASE("unused in the child") {
      ForkedChild child([&] {
        lock.reset();
        backend.reset();
        return kDone;
      });
      CHECK(child.exitStatus(2 * kLease + 5s) == kDone);
    }
    SUBCASE("after the child used it") {
      ForkedChild child([&] {
        lock->lock("fork-teardown");
        lock->unlock("fork-teardown");
        lock.reset();
        backend.reset();
        return kDone;
      });
      CHECK(child.exitStatus(2 * kLease + 5s) == kDone);
    }
    // The parent's lock still works.
    REQUIRE(lock->tryLock("fork-teardown", 5s));
    lock->unlock("fork-teardown");
  }

  TEST_CASE("holds inherited across fork() stay the parent's: not held in the child, still renewed after it") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    constexpr auto kLease = 600ms;
    auto lock = makeLock(server.uri(), kLease);
    exerciseBeforeFork(*lock, "fork-held");
    lock->lock("fork-held");
    dlock::Lease lease = lock->acquire("fork-lease");
    REQUIRE(lease.isHeld());

    ForkedChild child([&] {
      if (lock->isHeld("fork-held")) return kInheritedHeld;
      if (lock->holdCount("fork-held") != 0) return kInheritedCount;
      try {
        lock->unlock("fork-held");
        return kInheritedUnlock;
      } catch (const dlock::NotOwnerError&) {
      }
      if (lease.isHeld()) return kInheritedLeaseHeld;
      try {
        lease.release();
        return kInheritedLeaseRelease;
      } catch (const dlock::NotOwnerError&) {
      }
      // Destroying the lock must not release or stop anything of the parent's either.
      lock.reset();
      return kDone;
    });
    CHECK(child.exitStatus(10s) == kDone);

    // Still ours on the server, and still renewed: the PTTL goes back up after the child is gone.
    // Up from the lowest value seen since, not from the first: the first may have been read just
    // after a renewal, at the full lease, which no later renewal can exceed.
    for (const std::string key : {"fork-held", "fork-lease"}) {
      CAPTURE(key);
      long long lowest = pttl(client, key);
      REQUIRE(lowest > 0);
      long long now = lowest;
      const auto deadline = std::chrono::steady_clock::now() + 10 * kLease;
      while ((now = pttl(client, key)) <= lowest && now > 0 && std::chrono::steady_clock::now() < deadline) {
        lowest = now;
        std::this_thread::sleep_for(10ms);
      }
      CHECK(now > lowest);
    }
    CHECK(lock->isHeld("fork-held"));
    CHECK(lease.isHeld());
    CHECK_NOTHROW(lock->unlock("fork-held"));
    CHECK_NOTHROW(lease.release());
  }
  TEST_CASE("a child does not keep the parent's connections open: they end when the parent closes them") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    std::shared_ptr<dlock::IOperator> backend = dlock::connect(server.uri());
    auto lock = dlock::LockBuilder().backend(backend).build();
    exerciseBeforeFork(*lock, "fork-sockets");
    const auto subscribers = [&] { return dlock::test::releaseSubscribers(client, "fork-sockets"); };
    const auto clients = [&] {  // connections to the server, the test's own included
      const std::string list = client.ok({"CLIENT", "LIST"}).str;
      return std::count(list.begin(), list.end(), '\n');
    };
    REQUIRE(subscribers() == 1);  // the release subscriber lingers on the channel

    int release[2];
    REQUIRE(::pipe(release) == 0);
    ForkedChild child([&] {
      char byte = 0;
      return ::read(release[0], &byte, 1) == 1 ? kDone : kUnlockFailed;  // alive until the parent is done
    });
    ::close(release[0]);

    lock.reset();
    backend.reset();
    // Only the test's own client is left once the server has seen the parent's sockets close.
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while ((subscribers() != 0 || clients() != 1) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    CHECK(subscribers() == 0);
    CHECK(clients() == 1);
    CHECK(::write(release[1], "x", 1) == 1);
    ::close(release[1]);
    CHECK(child.exitStatus(10s) == kDone);
  }
}

#endif  // DLOCK_TEST_FORK_WITH_THREADS
