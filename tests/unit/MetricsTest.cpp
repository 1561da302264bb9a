// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "TestHelpers.h"
#include "dlock/IWait.h"
#include "dlock/LockError.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/Metrics.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/core/SemaphoreBuilder.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;

namespace {

// A wait strategy that counts its pauses: a pause follows a try that found the key taken.
struct PauseCounter final : dlock::IWait {
  std::atomic<int> count{0};
  void wait(const dlock::WaitContext&) override {
    count.fetch_add(1);
    std::this_thread::sleep_for(1ms);
  }
};

bool hasLine(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

std::size_t occurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Tries `key` once from another thread (another owner); true if it got it (then releases it).
bool otherThreadTakes(dlock::ILock& lock, const std::string& key, std::chrono::milliseconds timeout) {
  bool taken = false;
  std::thread other([&] {
    taken = lock.tryLock(key, timeout);
    if (taken) lock.unlock(key);
  });
  other.join();
  return taken;
}

}  // namespace

TEST_SUITE("Metrics") {
  TEST_CASE("each counter is a sample labelled with the lock's name") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto lock = dlock::LockBuilder()
                    .backend(std::make_shared<dlock::MemoryOperator>(clock))
                    .clock(clock)
                    .leaseTime(30s)
                    .name("orders")
                    .build();
    REQUIRE(lock->tryLock("a"));
    REQUIRE(lock->tryLock("a"));  // a reentry
    CHECK_FALSE(otherThreadTakes(*lock, "a", 0ms));
    lock->unlock("a");
    lock->unlock("a");
    REQUIRE(lock->tryLock("b"));
    clock->advance(31s);
    CHECK_THROWS_AS(lock->unlock("b"), dlock::LockLostError);

    CHECK(lock->stats().name == "orders");
    const std::string text = dlock::formatMetrics(*lock);
    CHECK(hasLine(text, "# TYPE dlock_acquisitions_total counter"));
    CHECK(hasLine(text, "dlock_acquisitions_total{lock=\"orders\"} 2"));
    CHECK(hasLine(text, "dlock_reentries_total{lock=\"orders\"} 1"));
    CHECK(hasLine(text, "dlock_failed_tries_total{lock=\"orders\"} 1"));
    CHECK(hasLine(text, "dlock_attempts_total{lock=\"orders\"} 3"));
    CHECK(hasLine(text, "dlock_lost_leases_total{lock=\"orders\"} 1"));
    CHECK(hasLine(text, "dlock_outage_retries_total{lock=\"orders\"} 0"));
    CHECK(hasLine(text, "dlock_hand_offs_total{lock=\"orders\"} 0"));  // the waiting try never held
    // The other thread's try found the key held: one wait, of no time, in the first bucket.
    CHECK(hasLine(text, "# TYPE dlock_wait_seconds histogram"));
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"orders\",le=\"0.001\"} 1"));
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"orders\",le=\"+Inf\"} 1"));
    CHECK(hasLine(text, "dlock_wait_seconds_count{lock=\"orders\"} 1"));
  }

  TEST_CASE("an acquisition after a wait for another owner's key counts as a hand-off, and one without a wait does not") {
    auto pauses = std::make_shared<PauseCounter>();
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).waitStrategy(pauses).leaseTime(30s).build();
    REQUIRE(lock->tryLock("k"));
    std::thread waiter([&] {
      lock->lock("k");
      lock->unlock("k");
    });
    // Released once the waiter pauses (its try found the key taken), so that it waits for a hand-off.
    while (pauses->count.load() == 0) std::this_thread::yield();
    lock->unlock("k");
    waiter.join();
    const dlock::LockStats stats = lock->stats();
    CHECK(stats.acquisitions == 2);
    CHECK(stats.handOffs == 1);
    CHECK(hasLine(dlock::formatMetrics(*lock), "dlock_hand_offs_total{lock=\"default\"} 1"));
  }

  TEST_CASE("a wait that timed out is counted in the bucket its duration falls in") {
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).leaseTime(30s).build();
    REQUIRE(lock->tryLock("k"));
    CHECK_FALSE(otherThreadTakes(*lock, "k", 20ms));  // held throughout: waits the 20 ms, then times out
    lock->unlock("k");

    const dlock::LockStats stats = lock->stats();
    CHECK(stats.waits.count() == 1);
    CHECK(stats.waitTime >= 20ms);
    const auto& bounds = dlock::WaitHistogram::kBoundsMillis;
    const auto bucket =
        static_cast<std::size_t>(std::lower_bound(bounds.begin(), bounds.end(), stats.waitTime.count()) - bounds.begin());
    CHECK(stats.waits.counts[bucket] == 1);
  }

  TEST_CASE("buckets are cumulative, end at +Inf, and the sum is the wait time in seconds") {
    dlock::LockStats stats;
    stats.name = "w";
    stats.waits.counts[0] = 1;   // <= 1 ms
    stats.waits.counts[4] = 2;   // <= 50 ms
    stats.waits.counts.back() = 1;  // above 30 s
    stats.waitTime = 31075ms;
    const std::string text = dlock::formatMetrics(std::vector<dlock::LockStats>{stats});
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"w\",le=\"0.001\"} 1"));
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"w\",le=\"0.025\"} 1"));
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"w\",le=\"0.05\"} 3"));
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"w\",le=\"30\"} 3"));
    CHECK(hasLine(text, "dlock_wait_seconds_bucket{lock=\"w\",le=\"+Inf\"} 4"));
    CHECK(hasLine(text, "dlock_wait_seconds_sum{lock=\"w\"} 31.075"));
    CHECK(hasLine(text, "dlock_wait_seconds_count{lock=\"w\"} 4"));
  }

  TEST_CASE("a name's backslash, double quote and line feed are escaped in the label") {
    dlock::LockStats stats;
    stats.name = "pay \"eu\"\\west\n2";
    const std::string text = dlock::formatMetrics(std::vector<dlock::LockStats>{stats});
    CHECK(hasLine(text, "dlock_acquisitions_total{lock=\"pay \\\"eu\\\"\\\\west\\n2\"} 0"));
  }

  TEST_CASE("several locks share each family's HELP and TYPE, and two with one name are a ConfigError") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto orders = dlock::LockBuilder().backend(backend).name("orders").build();
    auto payments = dlock::LockBuilder().backend(backend).name("payments").build();
    const std::string text = dlock::formatMetrics({orders, payments});
    CHECK(occurrences(text, "# TYPE dlock_acquisitions_total ") == 1);
    CHECK(occurrences(text, "# HELP dlock_wait_seconds ") == 1);
    CHECK(hasLine(text, "dlock_acquisitions_total{lock=\"orders\"} 0"));
    CHECK(hasLine(text, "dlock_acquisitions_total{lock=\"payments\"} 0"));

    auto unnamed = dlock::LockBuilder().backend(backend).build();
    auto alsoUnnamed = dlock::LockBuilder().backend(backend).build();
    CHECK(unnamed->stats().name == "default");
    CHECK_THROWS_AS((void)dlock::formatMetrics({unnamed, alsoUnnamed}), dlock::ConfigError);
  }

  TEST_CASE("the holds and waiting threads of a lock are gauges at every state") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    auto lock = dlock::LockBuilder().backend(backend).clock(clock).name("orders").build();
    REQUIRE(lock->tryLock("a"));
    REQUIRE(lock->tryLock("a"));  // a reentry is the same hold
    dlock::AcquireOptions once;
    once.waitTime = 0ms;
    dlock::Lease b = lock->acquire("b", once);
    REQUIRE(b);
    CHECK_FALSE(otherThreadTakes(*lock, "a", 0ms));  // a one-time try does not wait
    CHECK(lock->stats().holds == 2);
    CHECK(lock->stats().waiting == 0);
    std::thread waiter([&] {
      const bool held = lock->tryLock("a", 30s);
      CHECK(held);
      if (held) lock->unlock("a");
    });
    REQUIRE(dlock::test::eventually([&] { return lock->stats().waiting == 1; }));
    const std::string text = dlock::formatMetrics(*lock);
    CHECK(hasLine(text, "# TYPE dlock_holds gauge"));
    CHECK(hasLine(text, "dlock_holds{lock=\"orders\"} 2"));
    CHECK(hasLine(text, "# TYPE dlock_waiting_threads gauge"));
    CHECK(hasLine(text, "dlock_waiting_threads{lock=\"orders\"} 1"));
    lock->unlock("a");
    CHECK(lock->stats().holds == 2);  // still held once
    lock->unlock("a");
    waiter.join();
    CHECK(lock->stats().waiting == 0);
    CHECK(lock->stats().holds == 1);  // b
    b.release();
    CHECK(lock->stats().holds == 0);
  }

  TEST_CASE("a lost lease leaves the held gauge once the watchdog finds it") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    auto lock = dlock::LockBuilder().backend(backend).clock(clock).watchdogLease(30s).build();
    REQUIRE(lock->tryLock("k"));
    REQUIRE(backend->unlock("k", backend->holderOf("k")).released);  // taken away behind our back
    CHECK(lock->stats().holds == 1);
    clock->advance(10s);  // the next renewal finds it gone
    CHECK(lock->stats().holds == 0);
    CHECK(lock->stats().lostLeases == 1);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    CHECK(lock->stats().holds == 0);  // counted out once
  }

  TEST_CASE("a fixed-lease hold leaves the held gauge at its local deadline, before unlock finds it lost") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    auto lock = dlock::LockBuilder().backend(backend).clock(clock).leaseTime(10s).name("orders").build();
    REQUIRE(lock->tryLock("k"));
    dlock::AcquireOptions once;
    once.waitTime = 0ms;
    dlock::Lease lease = lock->acquire("l", once);
    REQUIRE(lease);
    CHECK(lock->stats().holds == 2);
    clock->advance(5s);
    lease.extend(20s);  // moves its local deadline: 25 s from the start
    clock->advance(5s);  // 'k' ended unseen: no watchdog looks at it
    CHECK(lock->stats().holds == 1);
    CHECK(hasLine(dlock::formatMetrics(*lock), "dlock_holds{lock=\"orders\"} 1"));
    clock->advance(15s);  // the extended lease has ended too
    CHECK(lock->stats().holds == 0);
    CHECK_THROWS_AS(lock->unlock("k"), dlock::LockLostError);
    CHECK(lock->stats().holds == 0);  // counted out once
    CHECK_THROWS_AS(lease.release(), dlock::LockLostError);
    CHECK(lock->stats().holds == 0);
    REQUIRE(lock->tryLock("k"));  // a new hold counts again
    CHECK(lock->stats().holds == 1);
    lock->unlock("k");
    CHECK(lock->stats().holds == 0);
  }

  TEST_CASE("fixed-lease read holds and permits leave their gauges at their local deadline") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    auto rw = dlock::LockBuilder().backend(backend).clock(clock).leaseTime(10s).name("config").buildReadWrite();
    auto semaphore =
        dlock::SemaphoreBuilder().backend(backend).clock(clock).leaseTime(10s).name("api").permits(3).build();
    REQUIRE(rw->readLock()->tryLock("cfg"));
    REQUIRE(rw->writeLock()->tryLock("other"));
    dlock::PermitLease two = semaphore->tryAcquire(2);
    REQUIRE(two);
    CHECK(rw->readLock()->stats().readHolds == 1);
    CHECK(rw->readLock()->stats().holds == 1);
    CHECK(semaphore->stats().permitsInUse == 2);
    clock->advance(10s);
    CHECK(rw->readLock()->stats().readHolds == 0);
    CHECK(rw->readLock()->stats().holds == 0);
    CHECK(semaphore->stats().permitsInUse == 0);
    CHECK_THROWS_AS(rw->readLock()->unlock("cfg"), dlock::LockLostError);
    CHECK_THROWS_AS(rw->writeLock()->unlock("other"), dlock::LockLostError);
    CHECK_THROWS_AS(two.release(), dlock::LockLostError);
    CHECK(semaphore->stats().permitsInUse == 0);
  }

  TEST_CASE("a read-write lock's gauges are per side, labelled side") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto rw = dlock::LockBuilder().backend(backend).name("config").buildReadWrite();
    REQUIRE(rw->readLock()->tryLock("cfg"));
    dlock::AcquireOptions once;
    once.waitTime = 0ms;
    dlock::Lease second = rw->readLock()->acquire("cfg", once);
    REQUIRE(second);
    std::thread writer([&] {
      const bool held = rw->writeLock()->tryLock("cfg", 30s);
      CHECK(held);
      if (held) rw->writeLock()->unlock("cfg");
    });
    REQUIRE(dlock::test::eventually([&] { return rw->writeLock()->stats().waiting == 1; }));
    const dlock::LockStats stats = rw->readLock()->stats();
    CHECK(stats.kind == dlock::StatsKind::ReadWrite);
    CHECK(stats.readHolds == 2);
    CHECK(stats.holds == 0);
    CHECK(stats.readWaiting == 0);
    const std::string text = dlock::formatMetrics(*rw);
    CHECK(hasLine(text, "dlock_holds{lock=\"config\",side=\"read\"} 2"));
    CHECK(hasLine(text, "dlock_holds{lock=\"config\",side=\"write\"} 0"));
    CHECK(hasLine(text, "dlock_waiting_threads{lock=\"config\",side=\"write\"} 1"));
    CHECK(hasLine(text, "dlock_waiting_threads{lock=\"config\",side=\"read\"} 0"));
    CHECK(occurrences(text, "dlock_acquisitions_total{") == 1);  // the counters count both sides, once
    rw->readLock()->unlock("cfg");
    second.release();
    writer.join();
    CHECK(rw->readLock()->stats().readHolds == 0);
    CHECK(rw->readLock()->stats().holds == 0);
    CHECK(rw->readLock()->stats().waiting == 0);
  }

  TEST_CASE("a semaphore's permits in use, capacity and waiting threads are gauges") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto semaphore = dlock::SemaphoreBuilder().backend(backend).name("partner-api").permits(3).build();
    dlock::PermitLease two = semaphore->tryAcquire(2);
    REQUIRE(two);
    std::thread waiter([&] { CHECK(semaphore->tryAcquire(2, 30s)); });
    REQUIRE(dlock::test::eventually([&] { return semaphore->stats().waiting == 1; }));
    const std::string text = dlock::formatMetrics(*semaphore);
    CHECK(hasLine(text, "# TYPE dlock_semaphore_permits_in_use gauge"));
    CHECK(hasLine(text, "dlock_semaphore_permits_in_use{lock=\"partner-api\"} 2"));
    CHECK(hasLine(text, "dlock_semaphore_capacity{lock=\"partner-api\"} 3"));
    CHECK(hasLine(text, "dlock_waiting_threads{lock=\"partner-api\"} 1"));
    CHECK(hasLine(text, "dlock_acquisitions_total{lock=\"partner-api\"} 1"));
    CHECK(text.find("dlock_holds{") == std::string::npos);  // permits, not holds
    two.release();
    waiter.join();  // its two permits were released as the waiter's PermitLease went
    CHECK(semaphore->stats().permitsInUse == 0);
    CHECK(semaphore->stats().waiting == 0);
    CHECK(semaphore->stats().capacity == 3);
    semaphore->resize(5);
    CHECK(semaphore->stats().capacity == 5);
  }
}
