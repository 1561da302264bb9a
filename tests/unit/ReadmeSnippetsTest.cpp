// SPDX-License-Identifier: Apache-2.0
// The README's and docs/reference.md's C++ snippets, run: DLOCK_README_SNIPPETS includes each
// ```cpp block as tests/ReadmeSnippets.cmake extracted it (the build also compiles each alone,
// in dlock_readme_snippets), and the cases below call the ones that need no server.
#include DLOCK_README_SNIPPETS

#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <stdexcept>

#include "TestHelpers.h"
#include "dlock/IConditionOperator.h"
#include "dlock/core/DefaultLock.h"
#include "dlock/memory/VirtualClock.h"

namespace {

// An HTTP server of cpp-httplib's shape that records the handler it is given.
struct FakeHttpServer {
  struct Request {};
  struct Response {
    std::string body;
    std::string contentType;
    void set_content(const std::string& content, const char* type) {
      body = content;
      contentType = type;
    }
  };
  std::string path;
  std::function<void(const Request&, Response&)> handler;
  template <class Handler>
  void Get(const std::string& at, Handler h) {  // NOLINT(readability-identifier-naming): httplib's name
    path = at;
    handler = std::move(h);
  }
};

// The pattern the README describes in words: every path from tryLock reaches unlock.
bool refundByHand(dlock::ILock& lock, const std::string& orderId) {
  const std::string key = "order:" + orderId;
  if (!lock.tryLock(key, std::chrono::seconds(2))) return false;
  try {
    // ... the critical section ...
  } catch (...) {
    lock.unlock(key);  // without this, a throw leaves the key held
    throw;
  }
  lock.unlock(key);  // LockLostError if the lease ended first
  return true;
}

}  // namespace

TEST_SUITE("Readme") {
  TEST_CASE("the README's guard releases the key when the critical section throws") {
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).build();
    try {
      dlock::ScopedLock guard(*lock, "order:44", std::chrono::seconds(2));
      REQUIRE(guard);
      throw std::runtime_error("the refund failed");
    } catch (const std::runtime_error&) {
    }
    CHECK_FALSE(lock->isHeld("order:44"));
    CHECK(lock->tryLock("order:44"));  // free for the next caller
    lock->unlock("order:44");
  }

  TEST_CASE("the README's semaphore snippet runs on the memory backend: a call waits for a permit, then gives it back") {
    auto payments = dlock::SemaphoreBuilder().backend(std::make_shared<dlock::MemoryOperator>()).name("payments-api").permits(1).build();
    CHECK(callPayments(*payments));
    CHECK(payments->availablePermits() == 1);
    dlock::PermitLease busy = payments->tryAcquire(1);
    REQUIRE(busy);
    dlock::AcquireOptions noWait;
    noWait.waitTime = std::chrono::milliseconds(0);
    CHECK_FALSE(payments->acquire(1, noWait));
  }

  TEST_CASE("the README's condition snippet runs on the memory backend: a worker waits for a job, a signal wakes it") {
    auto memory = std::make_shared<dlock::MemoryOperator>();
    auto lock = dlock::LockBuilder().backend(memory).build();
    std::atomic<long> jobs{0};
    dlock::CancelSource stop;
    std::thread waiting([&] { waitForWork(*lock, [&] { return jobs.load(); }, stop.token()); });
    // The worker is on the condition (so it gave up "jobs"): the job and its signal come now.
    auto& conditions = dynamic_cast<dlock::IConditionOperator&>(*memory);
    REQUIRE(dlock::test::eventually([&] { return conditions.inspectCondition("jobs", "has-work").waiters.size() == 1; }));
    jobs = 1;
    addJob(*lock);
    waiting.join();  // woken by the signal: it returned holding "jobs", and its guard let it go
    CHECK_FALSE(lock->isHeld("jobs"));
    CHECK(conditions.inspectCondition("jobs", "has-work").waiters.empty());
  }

  TEST_CASE("the README snippets run on the memory backend") {
    dlock::Client client(std::make_shared<dlock::MemoryOperator>());
    CHECK(refundOrder(client, "42"));
    CHECK(client.getLock("refunds")->stats().acquisitions == 1);
    CHECK_FALSE(client.getLock("refunds")->isHeld("order:42"));
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).build();
    CHECK(refund(*lock, "42"));
    CHECK_FALSE(lock->isHeld("order:42"));
    CHECK(refundByHand(*lock, "43"));
    CHECK_FALSE(lock->isHeld("order:43"));
    refundsRunOnTheMemoryBackend();
    transfer(*lock);
    handOff(*lock);
    auto fair = fairLock(std::make_shared<dlock::MemoryOperator>());
    CHECK(fair->tryLock("queue:1", std::chrono::milliseconds(0)));
    fair->unlock("queue:1");
    auto rw = configLock(std::make_shared<dlock::MemoryOperator>());
    std::map<std::string, std::string> store{{"endpoint", "db1:5432"}, {"pool", "32"}};
    reloadConfig(*rw, store);
    CHECK(readConfig(*rw, store).pool == "64");
    CHECK(rw->inspect("config").readers.empty());
    startUp(lock);
    shipOrder("42");
    nightlyReport();
    settleInvoice("7");
    dlock::resetDefaultLock();
    CHECK(lock->stats().lostLeases == 0);
    CHECK_FALSE(lock->isHeld("order:42"));
    CHECK_FALSE(lock->isHeld("invoice:7"));
  }

  TEST_CASE("the README's shutdown snippet: the CancelSource ends the worker's wait for a held key, and it takes nothing") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = dlock::LockBuilder().backend(backend).build();
    REQUIRE(holder->tryLock("job"));
    const std::string token = backend->holderOf("job");
    auto lock = dlock::LockBuilder().backend(backend).build();
    runUntilShutdown(*lock);  // returns once the cancelled wait threw InterruptedError and the worker joined
    CHECK(holder->isHeld("job"));
    CHECK(backend->holderOf("job") == token);
    holder->unlock("job");
  }

  TEST_CASE("destroying a lock that holds a key releases it at once") {
    auto clock = std::make_shared<dlock::VirtualClock>();
    auto backend = std::make_shared<dlock::MemoryOperator>(clock);
    destroyWhileHolding(backend);
    CHECK(backend->holderOf("nightly").empty());
    auto other = dlock::LockBuilder().backend(backend).clock(clock).build();
    bool taken = false;
    std::thread([&] {
      taken = other->tryLock("nightly");  // no lease to wait out
      if (taken) other->unlock("nightly");
    }).join();
    CHECK(taken);
  }

  TEST_CASE("the README's metrics handler serves formatMetrics with its content type") {
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).name("orders").build();
    REQUIRE(lock->tryLock("k"));
    lock->unlock("k");
    FakeHttpServer server;
    serveLockMetrics(server, {lock});
    FakeHttpServer::Response response;
    server.handler({}, response);
    CHECK(server.path == "/metrics");
    CHECK(response.contentType == dlock::kMetricsContentType);
    CHECK(response.body.find("\ndlock_acquisitions_total{lock=\"orders\"} 1\n") != std::string::npos);
  }

  TEST_CASE("the README's election snippet leads, then resigns its term") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    std::uint64_t term = 0;
    scheduleWhileLeading(backend, {}, [&](const dlock::Leadership& leading) {
      CHECK(leading.isLeader());
      term = leading.fencingToken();
    });
    CHECK(term > 0);
    CHECK(backend->holderOf("election:scheduler").empty());
  }

  TEST_CASE("the README's async acquires complete on the memory backend") {
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).build();
    reserveSeat(*lock, "12A");
    dlock::Lease later = reserveLater(*lock).get();  // after reserveSeat's callback released it
    CHECK(later.isHeld());
  }

  TEST_CASE("the reference's virtual-time snippet waits out a 30 s tryLock on the memory backend") {
    CHECK(waitsOutThirtySeconds());
  }
}
