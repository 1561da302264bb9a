// SPDX-License-Identifier: Apache-2.0
// dlock::Client on the memory backend: every primitive by name over one backend, shared copies,
// close() of everything it handed out, its stats and metrics.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "TestHelpers.h"
#include "dlock/Client.h"
#include "dlock/LockError.h"
#include "dlock/core/Metrics.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"
#include "examples/OrderService.h"

using namespace std::chrono_literals;

namespace {

struct ClientFixture {
  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::shared_ptr<dlock::MemoryOperator> backend = std::make_shared<dlock::MemoryOperator>(clock);
  dlock::Client client{backend, dlock::ClientOptions{{}, clock, nullptr}};
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("Client") {
  TEST_CASE_FIXTURE(ClientFixture, "a name hands out the same lock each time, its default key the name") {
    const auto orders = client.getLock("orders");
    CHECK(orders == client.getLock("orders"));
    CHECK(orders != client.getLock("payments"));
    CHECK(orders->defaultKey() == "orders");
    CHECK(orders->stats().name == "orders");
    REQUIRE(orders->tryLock());
    CHECK(backend->inspect("orders").held);
    REQUIRE(client.getLock("orders")->tryLock("order:42"));  // any key, reentrant through the same object
    CHECK(orders->holdCount("order:42") == 1);
    orders->unlock("order:42");
    orders->unlock();
    CHECK_FALSE(backend->inspect("orders").held);
  }

  TEST_CASE_FIXTURE(ClientFixture, "the fair lock, read-write lock, semaphore and condition share the one backend") {
    const auto fair = client.getFairLock("queue");
    CHECK(fair == client.getFairLock("queue"));
    REQUIRE(fair->tryLock());
    CHECK(backend->inspect("queue").held);
    fair->unlock();

    const auto config = client.getReadWriteLock("config");
    CHECK(config == client.getReadWriteLock("config"));
    REQUIRE(config->readLock()->tryLock("config"));
    CHECK(backend->inspectReadWrite("config").readers.size() == 1);
    config->readLock()->unlock("config");

    const auto partner = client.getSemaphore("partner-api", 3);
    CHECK(partner == client.getSemaphore("partner-api", 3));
    CHECK(partner->capacity() == 3);
    {
      dlock::PermitLease permits = partner->tryAcquire(2);
      REQUIRE(permits);
      CHECK(backend->inspectSemaphore("partner-api").inUse == 2);
    }
    CHECK(backend->inspectSemaphore("partner-api").inUse == 0);

    const auto jobs = client.getLock("jobs");
    dlock::Condition ready = client.getCondition("jobs", "ready");
    CHECK(ready.key() == "jobs");
    CHECK(ready.name() == "ready");
    REQUIRE(jobs->tryLock());
    CHECK_FALSE(ready.awaitFor(0ms));  // checks the hold only: held, nobody signalled
    ready.signal();                    // nobody waits: not remembered
    jobs->unlock();
  }

  TEST_CASE_FIXTURE(ClientFixture, "a name is one primitive's, and a semaphore keeps its capacity") {
    (void)client.getLock("orders");
    CHECK_THROWS_WITH_AS((void)client.getReadWriteLock("orders"), doctest::Contains("the name is a lock's already"),
                         dlock::ConfigError);
    CHECK_THROWS_AS((void)client.getFairLock("orders"), dlock::ConfigError);
    CHECK_THROWS_AS((void)client.getSemaphore("orders", 2), dlock::ConfigError);
    (void)client.getSemaphore("partner-api", 3);
    CHECK_THROWS_WITH_AS((void)client.getSemaphore("partner-api", 4),
                         doctest::Contains("handed out with a capacity of 3, asked for 4"), dlock::ConfigError);
    CHECK_THROWS_AS((void)client.getLock("partner-api"), dlock::ConfigError);
    CHECK_THROWS_AS((void)client.getCondition("partner-api", "c"), dlock::ConfigError);
  }

  TEST_CASE_FIXTURE(ClientFixture, "bad names, capacities and options are typed errors, with nothing sent") {
    const auto callsBefore = backend->calls();
    CHECK_THROWS_AS((void)client.getLock(""), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)client.getReadWriteLock(std::string(2000, 'k')), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)client.getSemaphore("s", 0), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)client.getSemaphore("s", dlock::kMaxSemaphorePermits + 1), dlock::InvalidArgumentError);
    CHECK_THROWS_AS((void)client.getCondition("jobs", ""), dlock::InvalidArgumentError);
    CHECK(backend->calls() == callsBefore);
    CHECK_THROWS_AS(dlock::Client(std::shared_ptr<dlock::IOperator>()), dlock::ConfigError);
    dlock::ClientOptions tooShort;
    tooShort.lock.watchdogLease = 1ms;
    CHECK_THROWS_WITH_AS(dlock::Client(backend, tooShort), doctest::Contains("watchdogLease"), dlock::ConfigError);
    CHECK_THROWS_AS(dlock::Client("nosuch://host"), dlock::ConfigError);
  }

  TEST_CASE_FIXTURE(ClientFixture, "an owner label is recorded by getLock locks and left out of the fair and read-write ones") {
    dlock::ClientOptions labelled{{}, clock, nullptr};
    labelled.lock.ownerLabel = "billing";
    dlock::Client named(backend, labelled);
    REQUIRE(named.getLock("a")->tryLock());
    CHECK(backend->inspect("a").owner.find("billing") != std::string::npos);
    named.getLock("a")->unlock();
    REQUIRE(named.getFairLock("f")->tryLock());
    named.getFairLock("f")->unlock();
    REQUIRE(named.getReadWriteLock("rw")->readLock()->tryLock("rw"));
    named.getReadWriteLock("rw")->readLock()->unlock("rw");
  }

  TEST_CASE_FIXTURE(ClientFixture, "copies share one state: what one hands out, the other has") {
    dlock::Client copy = client;
    CHECK(copy.getLock("orders") == client.getLock("orders"));
    CHECK(copy.getSemaphore("s", 2) == client.getSemaphore("s", 2));
    CHECK(copy.backend() == client.backend());
    copy.close();
    CHECK(client.closed());
  }

  TEST_CASE_FIXTURE(ClientFixture, "the options reach every primitive, and the builders come preset") {
    dlock::ClientOptions leased{{}, clock, nullptr};
    leased.lock.leaseTime = 10s;
    dlock::Client fixed(backend, leased);
    REQUIRE(fixed.getLock("a")->tryLock());
    dlock::PermitLease permit = fixed.getSemaphore("s", 1).get()->tryAcquire();
    REQUIRE(permit);
    clock->advance(11s);  // fixed leases, not renewed: both ended
    CHECK_FALSE(fixed.getLock("a")->isHeld());
    CHECK(backend->inspectSemaphore("s").inUse == 0);

    // A lock the client does not make: preset with its backend and clock, named by the caller.
    auto own = fixed.lockBuilder().name("own").leaseTime(5s).build();
    REQUIRE(own->tryLock("k"));
    CHECK(backend->inspect("k").held);
    CHECK(own->stats().name == "own");
    clock->advance(6s);
    CHECK_FALSE(own->isHeld("k"));
    auto sem = fixed.semaphoreBuilder().name("own-sem").permits(2).build();
    CHECK(sem->tryAcquire(2));
    CHECK(fixed.stats().size() == 2);  // a and s: builders' products are not the client's
  }

  TEST_CASE_FIXTURE(ClientFixture, "close ends the waits, releases the thread holds and refuses later calls") {
    const auto orders = client.getLock("orders");
    const auto config = client.getReadWriteLock("config");
    const auto partner = client.getSemaphore("partner-api", 1);
    REQUIRE(orders->tryLock("k"));
    REQUIRE(config->readLock()->tryLock("cfg"));
    dlock::PermitLease permit = partner->tryAcquire();
    REQUIRE(permit);
    // Another process holds "busy"; a thread of ours waits for it, one more for a permit.
    REQUIRE(backend->lock("busy", "another-process", 60s).acquired);
    std::atomic<int> interrupted{0};
    std::thread lockWaiter([&] {
      try {
        (void)orders->tryLock("busy", 30s);
      } catch (const dlock::InterruptedError&) {
        ++interrupted;
      }
    });
    std::thread permitWaiter([&] {
      try {
        (void)partner->tryAcquire(1, 30s);
      } catch (const dlock::InterruptedError&) {
        ++interrupted;
      }
    });
    REQUIRE(dlock::test::eventually([&] { return orders->stats().waiting == 1 && partner->stats().waiting == 1; }));

    client.close();
    lockWaiter.join();
    permitWaiter.join();
    CHECK(interrupted == 2);
    CHECK_FALSE(backend->inspect("k").held);                     // released at close
    CHECK(backend->inspectReadWrite("cfg").readers.empty());     // both sides closed
    CHECK(backend->inspectSemaphore("partner-api").inUse == 1);  // a PermitLease stays its holder's
    CHECK_THROWS_AS(orders->unlock("k"), dlock::LockLostError);
    CHECK_THROWS_AS((void)orders->tryLock("k"), dlock::InterruptedError);
    CHECK_THROWS_AS((void)config->writeLock()->tryLock("other"), dlock::InterruptedError);
    CHECK_THROWS_WITH_AS((void)client.getLock("orders"), doctest::Contains("the client was closed"),
                         dlock::InterruptedError);
    CHECK_THROWS_AS((void)client.getSemaphore("partner-api", 1), dlock::InterruptedError);
    CHECK_THROWS_AS((void)client.getReadWriteLock("other"), dlock::InterruptedError);
    CHECK(client.closed());
    client.close();  // idempotent
    permit.release();
    CHECK(backend->inspectSemaphore("partner-api").inUse == 0);
  }

  TEST_CASE_FIXTURE(ClientFixture, "formatMetrics of the client has everything it handed out, each family once") {
    (void)client.getLock("orders");
    (void)client.getReadWriteLock("config");
    const auto partner = client.getSemaphore("partner-api", 3);
    dlock::PermitLease permits = partner->tryAcquire(2);
    REQUIRE(permits);
    const std::vector<dlock::LockStats> stats = client.stats();
    REQUIRE(stats.size() == 3);
    CHECK(stats[0].name == "orders");
    CHECK(stats[1].kind == dlock::StatsKind::ReadWrite);
    CHECK(stats[2].permitsInUse == 2);
    const std::string text = dlock::formatMetrics(client);
    CHECK(contains(text, "dlock_acquisitions_total{lock=\"partner-api\"} 1\n"));
    CHECK(contains(text, "dlock_holds{lock=\"orders\"} 0\n"));
    CHECK(contains(text, "dlock_holds{lock=\"config\",side=\"read\"} 0\n"));
    CHECK(contains(text, "dlock_semaphore_permits_in_use{lock=\"partner-api\"} 2\n"));
    CHECK(contains(text, "dlock_semaphore_capacity{lock=\"partner-api\"} 3\n"));
    CHECK(text.find("# TYPE dlock_holds gauge") == text.rfind("# TYPE dlock_holds gauge"));
  }

  TEST_CASE_FIXTURE(ClientFixture, "an election from the client: the same object by name, in its metrics, closed with it") {
    const auto scheduler = client.getElection("scheduler");
    CHECK(client.getElection("scheduler") == scheduler);
    CHECK_THROWS_AS((void)client.getLock("scheduler"), dlock::ConfigError);  // the name is the election's
    dlock::Leadership term = scheduler->campaign("host-a");
    REQUIRE(term.isLeader());
    CHECK(client.elections() == std::vector<std::shared_ptr<dlock::Election>>{scheduler});
    CHECK(client.stats().empty());  // an election's metrics are its own
    const std::string text = dlock::formatMetrics(client);
    CHECK(contains(text, "{election=\"scheduler\"} 1\n"));
    client.close();  // resigns the term
    CHECK_FALSE(term.isLeader());
    CHECK_FALSE(backend->inspect("election:scheduler").held);
    CHECK_THROWS_AS((void)scheduler->campaign("host-a"), dlock::InterruptedError);
    CHECK_THROWS_AS((void)client.getElection("scheduler"), dlock::InterruptedError);
  }

  TEST_CASE("a service injected with the client's lock sells no unit twice") {
    dlock::Client client(std::make_shared<dlock::MemoryOperator>());
    auto inventory = std::make_shared<examples::Inventory>();
    inventory->add("widget", 30);
    std::atomic<int> placed{0};
    std::vector<std::thread> instances;
    for (int i = 0; i < 4; ++i) {
      instances.emplace_back([&] {
        examples::OrderService service(client.getLock("orders"), inventory);
        for (int order = 0; order < 10; ++order) {
          if (service.placeOrder("widget") == examples::OrderResult::Placed) ++placed;
        }
      });
    }
    for (auto& instance : instances) instance.join();
    CHECK(placed == 30);
    CHECK(inventory->unitsOf("widget") == 0);
    CHECK(client.getLock("orders")->stats().acquisitions == 40);
  }
}
