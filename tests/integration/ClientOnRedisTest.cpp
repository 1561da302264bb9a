// SPDX-License-Identifier: Apache-2.0
// dlock::Client from a URI against a real redis-server: every primitive it hands out keeps its
// state on the server, two clients (two services) contend through it, and close() frees the
// server's keys of the holds it releases.
#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>

#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/Client.h"
#include "dlock/LockError.h"
#include "dlock/core/Metrics.h"

using namespace std::chrono_literals;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;

TEST_SUITE("ClientOnRedis") {
  TEST_CASE("a client from a URI hands out primitives whose state is on the server") {
    RedisProcess server;
    RedisClient redis(server.host(), server.port());
    dlock::Client client(server.uri());
    dlock::Client other(server.uri());  // another service, its own connections

    const auto orders = client.getLock("orders");
    REQUIRE(orders->tryLock("order:42"));
    CHECK(redis.ok({"EXISTS", "dlock:{order:42}"}).integer == 1);
    CHECK_FALSE(other.getLock("orders")->tryLock("order:42"));  // held by the first service
    orders->unlock("order:42");
    CHECK(redis.ok({"EXISTS", "dlock:{order:42}"}).integer == 0);
    REQUIRE(other.getLock("orders")->tryLock("order:42", 5s));
    other.getLock("orders")->unlock("order:42");

    const auto fair = client.getFairLock("nightly");
    REQUIRE(fair->tryLock());
    CHECK_FALSE(other.getFairLock("nightly")->tryLock());
    fair->unlock();

    const auto config = client.getReadWriteLock("config");
    REQUIRE(config->readLock()->tryLock("config"));
    REQUIRE(other.getReadWriteLock("config")->readLock()->tryLock("config"));  // readers share
    CHECK(config->inspect("config").readers.size() == 2);
    bool written = true;
    std::thread writer([&] { written = other.getReadWriteLock("config")->writeLock()->tryLock("config"); });
    writer.join();
    CHECK_FALSE(written);  // two readers hold it
    config->readLock()->unlock("config");
    other.getReadWriteLock("config")->readLock()->unlock("config");

    const auto partner = client.getSemaphore("partner-api", 3);
    dlock::PermitLease two = partner->tryAcquire(2);
    REQUIRE(two);
    CHECK_FALSE(other.getSemaphore("partner-api", 3)->tryAcquire(2));  // one permit left
    CHECK(other.getSemaphore("partner-api", 3)->availablePermits() == 1);
    two.release();

    const auto text = dlock::formatMetrics(client);
    CHECK(text.find("dlock_acquisitions_total{lock=\"orders\"} 1\n") != std::string::npos);
    CHECK(text.find("dlock_semaphore_capacity{lock=\"partner-api\"} 3\n") != std::string::npos);
  }

  TEST_CASE("a condition from the client wakes a waiter in another client") {
    RedisProcess server;
    dlock::Client client(server.uri());
    dlock::Client worker(server.uri());
    std::atomic<bool> woken{false};
    std::thread waiter([&] {
      const auto jobs = worker.getLock("jobs");
      jobs->lock();
      dlock::Condition ready = worker.getCondition("jobs", "ready");
      while (!woken) ready.await();  // signalled while it waits (spurious returns loop)
      jobs->unlock();
    });
    // The worker's await has given the key up and queued: it is the condition's waiter now.
    const auto jobs = client.getLock("jobs");
    REQUIRE(dlock::test::eventually([&] {
      if (!jobs->tryLock()) return false;
      const bool queued = worker.getLock("jobs")->stats().acquisitions == 1;
      if (!queued) jobs->unlock();
      return queued;
    }));
    woken = true;
    client.getCondition("jobs", "ready").signal();
    jobs->unlock();
    waiter.join();
    CHECK(worker.getLock("jobs")->stats().acquisitions >= 2);  // the first hold, and its re-take after the signal
  }

  TEST_CASE("close releases the thread holds on the server and refuses what follows") {
    RedisProcess server;
    RedisClient redis(server.host(), server.port());
    dlock::Client client(server.uri());
    REQUIRE(client.getLock("orders")->tryLock("k"));
    REQUIRE(client.getReadWriteLock("config")->writeLock()->tryLock("cfg"));
    CHECK(redis.ok({"EXISTS", "dlock:{k}"}).integer == 1);
    client.close();
    CHECK(redis.ok({"EXISTS", "dlock:{k}"}).integer == 0);
    dlock::Client other(server.uri());
    CHECK(other.getReadWriteLock("config")->writeLock()->tryLock("cfg"));  // free again
    other.getReadWriteLock("config")->writeLock()->unlock("cfg");
    CHECK_THROWS_AS((void)client.getLock("orders"), dlock::InterruptedError);
  }
}
