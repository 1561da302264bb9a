// SPDX-License-Identifier: Apache-2.0
// One watchdog behind a dlock::Client, on the memory backend and the virtual clock: one thread for
// every primitive it hands out, one renewal batch per tick, each primitive's losses to its own
// handler, and close() of one primitive stopping its leases only.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "TestHelpers.h"
#include "ThreadState.h"
#include "dlock/Client.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;

namespace {

constexpr const char* kWatchdogThread = "dlock-watchdog";

// A client over the memory backend on a virtual clock (30 s leases, renewed every 10 s), holding
// a lock, a fair lock, a write and a read hold and two permits at once.
struct HeldEverywhere {
  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::shared_ptr<dlock::MemoryOperator> backend = std::make_shared<dlock::MemoryOperator>(clock);
  dlock::Client client{backend, dlock::ClientOptions{{}, clock, nullptr}};
  const int threadsBefore = dlock::test::threadsNamed(kWatchdogThread);
  std::shared_ptr<dlock::ILock> lock = client.getLock("orders");
  std::shared_ptr<dlock::ILock> fair = client.getFairLock("queue");
  std::shared_ptr<dlock::ReadWriteLock> config = client.getReadWriteLock("config");
  std::shared_ptr<dlock::Semaphore> partner = client.getSemaphore("partner-api", 3);
  dlock::PermitLease permits;

  HeldEverywhere() {
    REQUIRE(lock->tryLock());
    REQUIRE(fair->tryLock());
    REQUIRE(config->writeLock()->tryLock("config:w"));
    REQUIRE(config->readLock()->tryLock("config:r"));
    permits = partner->tryAcquire(2);
    REQUIRE(permits);
  }
  ~HeldEverywhere() {
    permits = dlock::PermitLease();
    client.close();
  }

  [[nodiscard]] std::map<std::string, std::uint64_t> renewals() const {
    return {{"orders", lock->stats().renewals},
            {"queue", fair->stats().renewals},
            {"config", config->readLock()->stats().renewals},
            {"partner-api", partner->stats().renewals}};
  }
};

// The keys each handler heard of, by primitive.
struct LossLog {
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> heard;  // guarded by mutex
  std::atomic<int> notices{0};

  dlock::ILock::LostHandler to(const std::string& primitive) {
    return [this, primitive](std::string_view key, std::uint64_t) {
      {
        std::lock_guard<std::mutex> guard(mutex);
        heard[primitive].emplace_back(key);
      }
      notices.fetch_add(1);
    };
  }
};

}  // namespace

TEST_SUITE("Client") {
  TEST_CASE_FIXTURE(HeldEverywhere, "a lock, a fair lock, read and write holds and permits share one watchdog thread and one batch per tick") {
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
    const std::uint64_t batches = backend->renewalBatches();
    clock->advance(10s);  // a third of the 30 s lease: every hold is due, in the same round
    CHECK(backend->renewalBatches() == batches + 1);
    for (const auto& each : renewals()) CHECK_MESSAGE(each.second == (each.first == "config" ? 2 : 1), each.first);
    CHECK(config->writeLock()->stats().renewalRoundTrips == 1);  // both sides in the round's one call
    clock->advance(10s);
    CHECK(backend->renewalBatches() == batches + 2);
    clock->advance(25s);  // past the first lease end: alive only by the renewals
    CHECK(lock->isHeld());
    CHECK(fair->isHeld());
    CHECK(config->writeLock()->isHeld("config:w"));
    CHECK(config->readLock()->isHeld("config:r"));
    CHECK(permits.isHeld());
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
  }

  TEST_CASE_FIXTURE(HeldEverywhere, "each primitive's lost leases go to its own handler") {
    LossLog log;
    lock->onLockLost(log.to("orders"));
    fair->onLockLost(log.to("queue"));
    config->writeLock()->onLockLost(log.to("config"));
    partner->onPermitsLost(log.to("partner-api"));
    backend->forgetLeases();  // as a server restarted without its data
    clock->advance(10s);      // the next round finds every hold gone
    REQUIRE(dlock::test::eventually([&] { return log.notices.load() == 5; }));
    std::lock_guard<std::mutex> guard(log.mutex);
    CHECK(log.heard["orders"] == std::vector<std::string>{"orders"});
    CHECK(log.heard["queue"] == std::vector<std::string>{"queue"});
    std::vector<std::string> sides = log.heard["config"];
    std::sort(sides.begin(), sides.end());
    CHECK(sides == std::vector<std::string>{"config:r", "config:w"});
    CHECK(log.heard["partner-api"] == std::vector<std::string>{"partner-api"});
    CHECK(lock->stats().lostLeases == 1);
    CHECK(partner->stats().lostLeases == 1);
  }

  TEST_CASE_FIXTURE(HeldEverywhere, "close() of one primitive stops its leases only, and the thread goes on for the others") {
    const std::uint64_t ordersRenewed = lock->stats().renewals;
    lock->close();  // releases the thread hold it keeps
    CHECK_FALSE(backend->inspect("orders").held);
    partner->close();  // the PermitLease is its holder's: still renewed
    // A lock from the client's builder shares the thread too; destroyed, it leaves it.
    auto extra = client.lockBuilder().name("extra").build();
    REQUIRE(extra->tryLock("x"));
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
    extra.reset();
    CHECK_FALSE(backend->inspect("x").held);
    clock->advance(10s);
    CHECK(lock->stats().renewals == ordersRenewed);
    auto now = renewals();
    CHECK(now["queue"] == 1);
    CHECK(now["config"] == 2);
    CHECK(now["partner-api"] == 1);
    clock->advance(25s);
    CHECK(fair->isHeld());
    CHECK(config->readLock()->isHeld("config:r"));
    CHECK(permits.isHeld());
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == threadsBefore + 1);
  }

  TEST_CASE("two elections' terms and a lock's hold are renewed in one batch per tick, on the client's thread") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    dlock::ClientOptions options{{}, clock, nullptr};
    options.lock.watchdogLease = 15s;  // the elections' term lease: every lease due in the same round
    dlock::Client client(backend, options);
    const int before = dlock::test::threadsNamed(kWatchdogThread);
    dlock::Leadership scheduler = client.getElection("scheduler")->campaign("host-a");
    dlock::Leadership compactor = client.getElection("compactor")->campaign("host-a");
    const auto lock = client.getLock("orders");
    REQUIRE(lock->tryLock());
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == before + 1);
    const std::uint64_t batches = backend->renewalBatches();
    for (std::uint64_t round = 1; round <= 4; ++round) {  // to 20 s, past the first lease's end
      clock->advance(5s);  // a third of the lease: every lease due, in one round
      CHECK(backend->renewalBatches() == batches + round);
      CHECK(lock->stats().renewals == round);
    }
    CHECK(scheduler.isLeader());
    CHECK(compactor.isLeader());
    CHECK(lock->isHeld());
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == before + 1);
    lock->unlock();
    client.close();
  }

  TEST_CASE("a primitive built apart from a client keeps a watchdog of its own") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    dlock::Client client(backend, dlock::ClientOptions{{}, clock, nullptr});
    const int before = dlock::test::threadsNamed(kWatchdogThread);
    auto apart = dlock::LockBuilder().backend(backend).clock(clock).name("apart").build();
    REQUIRE(apart->tryLock());
    REQUIRE(client.getLock("orders")->tryLock());
    CHECK(dlock::test::threadsNamed(kWatchdogThread) == before + 2);
    const std::uint64_t batches = backend->renewalBatches();
    clock->advance(10s);
    CHECK(backend->renewalBatches() == batches + 1);  // the client's round; the lone lock renews through extendAll
    CHECK(apart->stats().renewals == 1);
    apart->unlock();
    client.getLock("orders")->unlock();
  }
}
