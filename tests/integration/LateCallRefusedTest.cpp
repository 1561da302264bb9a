// SPDX-License-Identifier: Apache-2.0
// An acquire its caller gave up during a server pause never takes its key when the server resumes:
// each script that takes, queues or re-takes a key carries the instant its caller stops waiting,
// in the server's clock, and the server refuses it after that (DLOCKLATE) — with no second
// connection and no admin command. The same for a cancelled wait, which also ends within a few
// ms of its cancel, however long the server stays paused.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/Cancel.h"
#include "dlock/LockError.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/Semaphore.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

constexpr auto kWait = 300ms;

// The keys of `tag` (a lock's hash tag) other than its fencing counter: the lock, a queue, a
// tombstone, a reader's or writer's record.
long long keysBesidesFence(RedisClient& admin, const std::string& tag) {
  long long count = 0;
  for (const auto& name : admin.ok({"KEYS", "*{" + tag + "}*"}).elements) {
    const std::string& text = name.str;
    if (text.size() < 6 || text.compare(text.size() - 6, 6, ":fence") != 0) ++count;
  }
  return count;
}

// The server's clock less this machine's, in seconds, as TIME shows it.
long long serverAheadSeconds(RedisClient& admin) {
  const auto reply = admin.ok({"TIME"});
  const long long local = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
  return std::stoll(reply.elements.at(0).str) - local;
}

// Resumes the server at scope exit, whatever a failed check did.
struct Resume {
  RedisProcess& server;
  ~Resume() { server.resume(); }
};

// Each acquire, given up while the server is paused, and the keys it is for.
struct GivenUp {
  std::string what;
  std::string tag;                // the hash tag of its keys ("" for the semaphore's, checked by use)
  std::function<void()> giveUp;   // throws or returns empty: the caller gave up
};

// `cancelAfter` of `kWait` from another thread; returns how long the cancel took to end the wait.
template <class Wait>
std::chrono::milliseconds cancelledAfterWait(Wait wait) {
  dlock::CancelSource source;
  std::chrono::steady_clock::time_point cancelledAt;
  std::thread canceller([&] {
    std::this_thread::sleep_for(kWait);
    cancelledAt = std::chrono::steady_clock::now();
    source.requestCancel();
  });
  CHECK_THROWS_AS(wait(source.token()), dlock::InterruptedError);
  const auto ended = std::chrono::steady_clock::now();
  canceller.join();
  return std::chrono::duration_cast<std::chrono::milliseconds>(ended - cancelledAt);
}

}  // namespace

TEST_SUITE("LateCallRefused") {
  TEST_CASE("acquires given up while the server is paused never take their keys when it resumes") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    const auto backend = dlock::connect(server.uri() + "?command_timeout=300ms");
    const auto lock = dlock::LockBuilder().backend(backend).outageTolerance(0ms).build();
    const auto fair = dlock::LockBuilder().backend(backend).fair(true).outageTolerance(0ms).build();
    const auto readWrite = dlock::LockBuilder().backend(backend).outageTolerance(0ms).buildReadWrite();
    const auto semaphore = dlock::SemaphoreBuilder().backend(backend).name("s").permits(1).build();
    // The cancelled waits ride the outage out (the default tolerance) until their cancel.
    const auto patient = dlock::LockBuilder().backend(backend).build();
    const auto patientFair = dlock::LockBuilder().backend(backend).fair(true).build();
    // Every script loaded and a connection per caller warm: what the pause holds is the acquire.
    for (const auto& each : {lock, fair, patient, patientFair}) {
      REQUIRE(each->tryLock("warm-up"));
      each->unlock("warm-up");
    }
    REQUIRE(readWrite->writeLock()->tryLock("warm-up-rw"));
    readWrite->writeLock()->unlock("warm-up-rw");
    REQUIRE(readWrite->readLock()->tryLock("warm-up-rw"));
    readWrite->readLock()->unlock("warm-up-rw");
    REQUIRE(semaphore->tryAcquire(1));

    std::vector<std::chrono::milliseconds> cancelTook;
    const std::vector<GivenUp> acquires = {
        {"tryLock, default", "k1", [&] { (void)lock->tryLock("k1", kWait); }},
        {"tryLock, fair", "k2", [&] { (void)fair->tryLock("k2", kWait); }},
        {"tryLock, write", "rw1", [&] { (void)readWrite->writeLock()->tryLock("rw1", kWait); }},
        {"tryLock, read", "rw2", [&] { (void)readWrite->readLock()->tryLock("rw2", kWait); }},
        {"tryAcquire(1)", "", [&] { (void)semaphore->tryAcquire(1, kWait); }},
        {"lock(k, token) cancelled",
         "k3",
         [&] { cancelTook.push_back(cancelledAfterWait([&](const dlock::CancelToken& t) { patient->lock("k3", t); })); }},
        {"fair lock(k, token) cancelled",
         "k4",
         [&] { cancelTook.push_back(cancelledAfterWait([&](const dlock::CancelToken& t) { patientFair->lock("k4", t); })); }},
        {"acquire({cancel}) cancelled",
         "k5",
         [&] {
           cancelTook.push_back(cancelledAfterWait([&](const dlock::CancelToken& t) {
             dlock::AcquireOptions options;
             options.cancel = t;
             (void)patient->acquire("k5", options);
           }));
         }},
    };
    const long long refusedBefore = admin.errorReplies("DLOCKLATE");
    {
      Resume resume{server};
      server.pause();
      for (const GivenUp& each : acquires) {
        CAPTURE(each.what);
        try {
          each.giveUp();
        } catch (const dlock::ConnectionError&) {  // the paused server never answered: given up
        }
      }
    }
    // The scripts queued on the paused server ran when it resumed, and were refused (a wait cut
    // off while it waited for a connection sent none).
    CHECK(dlock::test::eventually([&] { return admin.errorReplies("DLOCKLATE") > refusedBefore; }));
    MESSAGE((admin.errorReplies("DLOCKLATE") - refusedBefore) << " late scripts refused");
    for (const GivenUp& each : acquires) {
      CAPTURE(each.what);
      // Nothing of it on the server once the cleanup that followed it ran (a tombstone ends too).
      if (!each.tag.empty()) CHECK(dlock::test::eventually([&] { return keysBesidesFence(admin, each.tag) == 0; }));
    }
    // A newcomer gets every key at once.
    const auto newcomer = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    for (const char* key : {"k1", "k3", "k5"}) {
      CHECK(newcomer->tryLock(key));
      newcomer->unlock(key);
    }
    const auto fairNewcomer = dlock::LockBuilder().backend(dlock::connect(server.uri())).fair(true).build();
    for (const char* key : {"k2", "k4"}) {
      CHECK(fairNewcomer->tryLock(key));
      fairNewcomer->unlock(key);
    }
    const auto rwNewcomer = dlock::LockBuilder().backend(dlock::connect(server.uri())).buildReadWrite();
    for (const char* key : {"rw1", "rw2"}) {
      CHECK(rwNewcomer->writeLock()->tryLock(key));
      rwNewcomer->writeLock()->unlock(key);
    }
    const auto semNewcomer = dlock::SemaphoreBuilder().backend(dlock::connect(server.uri())).name("s").permits(1).build();
    CHECK(static_cast<bool>(semNewcomer->tryAcquire(1)));
    // A cancel ended its wait within a few ms however long the server stayed paused (the call in
    // flight cut off, what follows it on the cleanup lane): an order below the pause.
    for (const auto took : cancelTook) {
      MESSAGE("a cancel during the pause ended its wait in " << took.count() << " ms");
      CHECK(took < 200ms);
    }
  }

  TEST_CASE("a bound script that reaches the server after its caller stopped waiting is refused, unrun") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    const auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri() + "?command_timeout=200ms")).build();
    REQUIRE(lock->tryLock("warm-up"));
    lock->unlock("warm-up");
    {
      Resume resume{server};
      server.pause();
      // One try, no reply: it threw at its deadline, so the queued script reaches the server after.
      CHECK_THROWS_AS((void)lock->tryLock("k"), dlock::ConnectionError);
    }
    CHECK(dlock::test::eventually([&] { return admin.errorReplies("DLOCKLATE") >= 1; }));
    CHECK(admin.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    CHECK(dlock::test::onceRecovered([&] { return lock->tryLock("k"); }));  // the same client, on a new connection
    if (lock->isHeld("k")) lock->unlock("k");
  }

  TEST_CASE("a step of the server's clock: forward, acquires still succeed, and back, late calls are refused again within a second") {
    const std::string shift = "/tmp/dlock-late-shift-" + std::to_string(::getpid());
    std::ofstream(shift) << "0\n";
    RedisProcess::Options options;
    options.env = {{"LD_PRELOAD", DLOCK_TEST_CLOCK_SHIFT},
                   {"DLOCK_CLOCK_SHIFT_FILE", shift},
                   {"ASAN_OPTIONS", "verify_asan_link_order=0"}};
    RedisProcess server(options);
    RedisClient admin(server.host(), server.port());
    const auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri() + "?command_timeout=300ms&pool_size=1"))
                          .outageTolerance(0ms)
                          .build();
    REQUIRE(lock->tryLock("warm-up"));
    lock->unlock("warm-up");

    // 5 s forward: the connection's sample is 5 s behind, so its next script looks late to the
    // server while the client still waits; it samples anew and sends it again.
    std::ofstream(shift) << "5\n";
    REQUIRE(dlock::test::eventually([&] { return serverAheadSeconds(admin) >= 4; }));
    CHECK(lock->tryLock("k"));
    lock->unlock("k");

    // 3 s back: until the connection samples again a late script could run up to 3 s after its
    // caller gave up (the stated tolerance); it samples within kClockSampleAge (1 s) of its use.
    std::ofstream(shift) << "-3\n";
    REQUIRE(dlock::test::eventually([&] { return serverAheadSeconds(admin) <= -2; }));
    // The sample's age, not an event on the server, decides: past kClockSampleAge (1 s) the next
    // script takes a new sample ahead of it.
    std::this_thread::sleep_for(1200ms);
    REQUIRE(lock->tryLock("warm-up"));
    lock->unlock("warm-up");
    const long long refusedBefore = admin.errorReplies("DLOCKLATE");
    {
      Resume resume{server};
      server.pause();
      CHECK_THROWS_AS((void)lock->tryLock("k2", kWait), dlock::ConnectionError);
    }
    CHECK(dlock::test::eventually([&] { return admin.errorReplies("DLOCKLATE") > refusedBefore; }));
    CHECK(dlock::test::eventually([&] { return keysBesidesFence(admin, "k2") == 0; }));
    std::remove(shift.c_str());
  }
}
