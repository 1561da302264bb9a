// SPDX-License-Identifier: Apache-2.0
// A cancel ends a wait at once even when the wait's try is in flight into a cut-off link: the try
// is cut off, and what it may have left on the server (a key it may yet take, a queue place) is
// given back on the cleanup lane, never on the caller's thread, where a new connection into the
// cut would hold the cancel for its timeouts. Once the link heals, nothing of the wait is left.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "LinkProxy.h"
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
using dlock::test::LinkProxy;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

namespace {

// Long enough that a cancel waiting for one call or connection into the cut is far above the bound.
constexpr auto kCallTimeout = 1000ms;
constexpr const char* kTimeouts = "?connect_timeout=1000ms&command_timeout=1000ms";
// A cancel's end, scheduler latency included; before the fix the cancel took 2 s and more here.
constexpr auto kCancelBound = 200ms;

// Starts `wait` with a cancel on its own thread, with the link cut; once its try waits in the
// cut, cancels it. How long the wait took to end after the cancel. The link heals once the try's
// own deadline (its command timeout) has passed, so that the server refuses it when it lands.
std::chrono::milliseconds cancelledInTheCut(LinkProxy& link, const std::function<void(const dlock::CancelToken&)>& wait) {
  dlock::CancelSource source;
  std::chrono::steady_clock::time_point ended;
  link.blackhole();
  std::thread waiter([&] {
    CHECK_THROWS_AS(wait(source.token()), dlock::InterruptedError);
    ended = std::chrono::steady_clock::now();
  });
  const bool inFlight = link.waitForBlackholed("EVAL", 5s);
  const auto cancelledAt = std::chrono::steady_clock::now();
  source.requestCancel();
  waiter.join();
  std::this_thread::sleep_until(cancelledAt + kCallTimeout + 100ms);
  link.pass();
  CHECK(inFlight);
  return std::chrono::duration_cast<std::chrono::milliseconds>(ended - cancelledAt);
}

}  // namespace

TEST_SUITE("CancelCutOff") {
  TEST_CASE("a cancel ends a wait whose try is in flight into a cut link at once, default, fair, read, write and "
            "permits, and nothing of the wait stays once the link heals") {
    RedisProcess server;
    RedisClient admin(server.host(), server.port());
    LinkProxy link(server.host(), server.port());
    const auto backend = dlock::connect(link.uri() + kTimeouts);
    const auto lock = dlock::LockBuilder().backend(backend).build();
    const auto fair = dlock::LockBuilder().backend(backend).fair(true).build();
    const auto readWrite = dlock::LockBuilder().backend(backend).buildReadWrite();
    const auto semaphore = dlock::SemaphoreBuilder().backend(backend).name("s").permits(1).build();
    const auto newcomer = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    const auto fairNewcomer = dlock::LockBuilder().backend(dlock::connect(server.uri())).fair(true).build();
    const auto rwNewcomer = dlock::LockBuilder().backend(dlock::connect(server.uri())).buildReadWrite();
    const auto semNewcomer =
        dlock::SemaphoreBuilder().backend(dlock::connect(server.uri())).name("s").permits(1).build();
    const auto takenOnce = [](dlock::ILock& each, const char* key) {
      if (!each.tryLock(key)) return false;
      each.unlock(key);
      return true;
    };
    struct Case {
      std::string what;
      std::function<bool()> free;  // a newcomer takes what the wait was for at once
      std::function<void(const dlock::CancelToken&)> wait;
      // Scripts loaded and a connection warm (a cancel closed the last one): what goes into the
      // cut is the wait's own try.
      std::function<void()> warmUp;
    };
    const auto warmLock = [](dlock::ILock& each) {
      REQUIRE(each.tryLock("warm-up"));
      each.unlock("warm-up");
    };
    const Case cases[] = {
        {"lock(k, token)", [&] { return takenOnce(*newcomer, "k1"); },
         [&](const dlock::CancelToken& t) { lock->lock("k1", t); }, [&] { warmLock(*lock); }},
        {"fair lock(k, token)", [&] { return takenOnce(*fairNewcomer, "k2"); },
         [&](const dlock::CancelToken& t) { fair->lock("k2", t); }, [&] { warmLock(*fair); }},
        {"write tryLock(k, 10s, token)", [&] { return takenOnce(*rwNewcomer->writeLock(), "rw1"); },
         [&](const dlock::CancelToken& t) { (void)readWrite->writeLock()->tryLock("rw1", 10s, t); },
         [&] { warmLock(*readWrite->writeLock()); }},
        {"read tryLock(k, 10s, token)", [&] { return takenOnce(*rwNewcomer->writeLock(), "rw2"); },
         [&](const dlock::CancelToken& t) { (void)readWrite->readLock()->tryLock("rw2", 10s, t); },
         [&] { warmLock(*readWrite->readLock()); }},
        {"acquire(1, {cancel})", [&] { return static_cast<bool>(semNewcomer->tryAcquire(1)); },
         [&](const dlock::CancelToken& t) {
           dlock::AcquireOptions options;
           options.waitTime = 10s;
           options.cancel = t;
           (void)semaphore->acquire(1, options);
         },
         [&] { REQUIRE(static_cast<bool>(semaphore->tryAcquire(1))); }},
    };
    for (const Case& each : cases) {
      CAPTURE(each.what);
      REQUIRE(dlock::test::eventually([&] {  // the backend may still be in its reconnect back-off
        try {
          each.warmUp();
          return true;
        } catch (const dlock::ConnectionError&) {
          return false;
        }
      }, 10s));
      const long long refusedBefore = admin.errorReplies("DLOCKLATE");
      const auto took = cancelledInTheCut(link, each.wait);
      MESSAGE(each.what << ": the cancel ended the wait in " << took.count() << " ms");
      CHECK(took < kCancelBound);
      // The try in the cut landed past its deadline: refused, unrun. What the wait may have left
      // (a queue place) is given back by the cleanup lane once the link healed.
      CHECK(dlock::test::eventually([&] { return admin.errorReplies("DLOCKLATE") > refusedBefore; }));
      CHECK(dlock::test::eventually(each.free, 10s));
    }
  }
}
