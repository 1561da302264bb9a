// SPDX-License-Identifier: Apache-2.0
// A timed wait on a slow but healthy link (a server a round trip of 1 to 100 ms away, as across
// regions) whose key another holds returns false at its deadline: it sends its last attempt early
// enough to be answered in time, never throws ConnectionError for a server that answered, and never
// closes the connection for a reply that came (no "reconnected" warning, no outage retry).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "LinkProxy.h"
#include "LogCapture.h"
#include "RedisProcess.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/Semaphore.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::LinkProxy;
using dlock::test::RedisProcess;

namespace {

constexpr auto kWait = 200ms;
constexpr int kWaits = 4;

// A server, the key holder beside it and a waiter `roundTrip` away (the proxy holds each reply).
struct SlowLink {
  explicit SlowLink(std::chrono::milliseconds roundTrip) { proxy.delay(roundTrip, LinkProxy::Direction::fromTarget); }
  RedisProcess server;
  LinkProxy proxy{server.host(), server.port()};
  std::shared_ptr<dlock::IOperator> near = dlock::connect(server.uri());
  std::shared_ptr<dlock::IOperator> far = dlock::connect(proxy.uri());
};

// The waiter's connection made and the scripts loaded (a first connect takes round trips of its own).
void warmUp(dlock::ILock& lock) {
  REQUIRE(lock.tryLock("warm-up"));
  lock.unlock("warm-up");
}

// `tryWait` (one timed wait for a key another holds) returns false every time, within its budget
// plus a round trip and the scheduler's slack, with no connection closed under it.
template <class TryWait>
void checkWaitsReturnFalse(std::chrono::milliseconds roundTrip, TryWait tryWait,
                           const std::function<dlock::LockStats()>& stats) {
  const std::uint64_t retriedBefore = stats().outageRetries;
  dlock::test::LogCapture log(spdlog::level::warn);
  for (int i = 0; i < kWaits; ++i) {
    const auto start = std::chrono::steady_clock::now();
    bool acquired = false;
    CHECK_NOTHROW(acquired = tryWait());
    CHECK_FALSE(acquired);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took >= kWait - roundTrip - 5ms);
    CHECK(took < kWait + 2 * roundTrip + 200ms);  // bounded by the link, not by a timeout
  }
  CHECK(stats().outageRetries == retriedBefore);
  CHECK(log.text().find("reconnect") == std::string::npos);
}

void checkAllPrimitives(std::chrono::milliseconds roundTrip) {
  SlowLink link(roundTrip);
  for (const bool fair : {false, true}) {
    CAPTURE(fair);
    const auto holder = dlock::LockBuilder().backend(link.near).fair(fair).build();
    const auto waiter = dlock::LockBuilder().backend(link.far).fair(fair).build();
    warmUp(*waiter);
    REQUIRE(holder->tryLock("k"));
    checkWaitsReturnFalse(roundTrip, [&] { return waiter->tryLock("k", kWait); },
                          [&] { return waiter->stats(); });
    holder->unlock("k");
  }
  {
    const auto holder = dlock::LockBuilder().backend(link.near).buildReadWrite();
    const auto waiter = dlock::LockBuilder().backend(link.far).buildReadWrite();
    const auto& read = waiter->readLock();
    warmUp(*read);
    REQUIRE(holder->writeLock()->tryLock("rw"));
    checkWaitsReturnFalse(roundTrip, [&] { return read->tryLock("rw", kWait); },
                          [&] { return read->stats(); });
    holder->writeLock()->unlock("rw");
  }
  {
    const auto holder = dlock::SemaphoreBuilder().backend(link.near).name("s").permits(1).build();
    const auto waiter = dlock::SemaphoreBuilder().backend(link.far).name("s").permits(1).build();
    REQUIRE(waiter->tryAcquire(1));  // made and released at once: a warm connection
    dlock::PermitLease held = holder->tryAcquire(1);
    REQUIRE(held);
    checkWaitsReturnFalse(roundTrip, [&] { return static_cast<bool>(waiter->tryAcquire(1, kWait)); },
                          [&] { return waiter->stats(); });
  }
}

}  // namespace

TEST_SUITE("SlowLinkWait") {
  TEST_CASE("a timed wait for a held key returns false on a 1 ms round trip") { checkAllPrimitives(1ms); }
  TEST_CASE("a timed wait for a held key returns false on a 10 ms round trip") { checkAllPrimitives(10ms); }
  TEST_CASE("a timed wait for a held key returns false on a 30 ms round trip") { checkAllPrimitives(30ms); }
  TEST_CASE("a timed wait for a held key returns false on a 100 ms round trip") { checkAllPrimitives(100ms); }
}
