// SPDX-License-Identifier: Apache-2.0
// The README's C++ snippets, verbatim (tests/CheckReadmeSnippets.cmake fails when they drift),
// so every snippet a reader copies compiles; the ones that need no server also run.
// clang-format off
#include <dlock/connect.h>

std::shared_ptr<dlock::IOperator> managedRedis() {
  return dlock::connect("rediss://default:s3cret@my-redis.example.com:6380");
}

std::shared_ptr<dlock::IOperator> privateRedis() {
  return dlock::connect(
      "rediss://my-redis.internal:6380?tls_ca_file=/etc/redis/ca.pem"
      "&tls_cert_file=/etc/redis/client.pem&tls_key_file=/etc/redis/client.key");
}

#include <dlock/ScopedLock.h>
#include <dlock/connect.h>
#include <dlock/core/LockBuilder.h>

std::shared_ptr<dlock::ILock> makeLock() {
  return dlock::LockBuilder()
      .backend(dlock::connect("redis://127.0.0.1:6379"))  // checks the server now
      .build();  // the watchdog keeps a 30 s lease alive while a key is held
}

bool refund(dlock::ILock& lock, const std::string& orderId) {
  dlock::ScopedLock guard(lock, "order:" + orderId, std::chrono::seconds(2));
  if (!guard) return false;  // busy: try later
  // ... the critical section: a throw here still releases the key ...
  return true;
}  // released here

#include <dlock/ScopedLock.h>
#include <dlock/core/LockBuilder.h>
#include <dlock/memory/MemoryOperator.h>

class Refunds {
 public:
  explicit Refunds(std::shared_ptr<dlock::ILock> lock) : lock_(std::move(lock)) {}

  bool refund(const std::string& orderId) {
    dlock::ScopedLock guard(*lock_, "order:" + orderId, std::chrono::seconds(2));
    if (!guard) return false;
    // ... read the order, pay it back, mark it refunded ...
    return true;
  }

 private:
  std::shared_ptr<dlock::ILock> lock_;
};

void refundsRunOnTheMemoryBackend() {  // a unit test: no server, no sleeping
  auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).build();
  Refunds refunds(lock);
  bool refunded = refunds.refund("42");     // true
  bool released = !lock->isHeld("order:42");  // true: the guard released it
  (void)refunded;
  (void)released;
}

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

std::shared_ptr<dlock::ILock> fairLock(std::shared_ptr<dlock::IOperator> backend) {
  return dlock::LockBuilder()
      .backend(std::move(backend))
      .fair(true)
      .waiterLease(std::chrono::seconds(5))  // the default: a dead waiter is skipped within it
      .build();
}

#include <dlock/macros.h>

void startUp(std::shared_ptr<dlock::ILock> lock) {
  dlock::setDefaultLock(std::move(lock));  // once; a macro used before this throws ConfigError
}

void shipOrder(const std::string& orderId) {
  DISTRIBUTED_LOCK("order:" + orderId);  // held until the scope ends, exceptions included
  // ...
}

void nightlyReport() {
  DISTRIBUTED_TRY_LOCK("report", std::chrono::seconds(1)) {
    // ran with the key held
  } else {
    // another host has it
  }
}

void settleInvoice(const std::string& invoiceId) {
  DISTRIBUTED_LOCK_NAMED(guard, "invoice:" + invoiceId);
  std::uint64_t fence = guard.fencingToken();  // give it to the storage: it refuses older tokens
  // ... the critical section; check dlock::defaultLock()->isHeld(guard.key()) before committing ...
  guard.unlock();  // LockLostError if the lease ended before this point
  (void)fence;
}

#include <map>

std::shared_ptr<dlock::ReadWriteLock> configLock(std::shared_ptr<dlock::IOperator> backend) {
  return dlock::LockBuilder().backend(std::move(backend)).buildReadWrite();  // the watchdog renews each hold
}

struct Config {
  std::string endpoint, pool;
};

Config readConfig(dlock::ReadWriteLock& rw, const std::map<std::string, std::string>& store) {
  DISTRIBUTED_READ_LOCK_WITH(rw, "config");  // beside other readers, never beside the writer
  return Config{store.at("endpoint"), store.at("pool")};
}

void reloadConfig(dlock::ReadWriteLock& rw, std::map<std::string, std::string>& store) {
  DISTRIBUTED_WRITE_LOCK_WITH(rw, "config");  // alone; readers arriving now queue behind it
  store["endpoint"] = "db2:5432";
  store["pool"] = "64";
}

#include <mutex>

void transfer(dlock::ILock& lock) {
  auto from = lock.mutex("account:1");
  auto to = lock.mutex("account:2");
  std::scoped_lock both(from, to);

  auto report = lock.mutex("report");
  std::unique_lock<dlock::MutexHandle> guard(report, std::chrono::seconds(2));  // try_lock_for
  if (!guard) return;
}

#include <thread>

void handOff(dlock::ILock& lock) {
  dlock::AcquireOptions options;
  options.waitTime = std::chrono::seconds(1);  // unset: wait as long as it takes; zero: try once
  dlock::Lease lease = lock.acquire("batch:7", options);
  if (!lease) return;  // timed out
  std::thread([held = std::move(lease)]() mutable { held.release(); }).join();  // any thread may release it
}

#include <dlock/ScopedLock.h>
#include <dlock/core/Condition.h>

// Workers on many hosts wait for a job; `pending` reads the job list, only under the key "jobs".
void waitForWork(dlock::ILock& lock, const std::function<long()>& pending, const dlock::CancelToken& stop) {
  dlock::Condition hasWork = lock.newCondition("jobs", "has-work");
  dlock::ScopedLock guard(lock, "jobs");
  while (pending() == 0) hasWork.await(stop);  // "jobs" is free while it waits, held again on return
  // ... take a job ...
}

void addJob(dlock::ILock& lock) {
  dlock::ScopedLock guard(lock, "jobs");
  // ... add the job ...
  lock.newCondition("jobs", "has-work").signal();  // the longest waiter; signalAll() wakes every one
}

void worker(dlock::ILock& lock, const dlock::CancelToken& stop) {
  lock.lock("job", stop);  // InterruptedError once the service's CancelSource is cancelled
  // ...
  lock.unlock("job");
}

void destroyWhileHolding(std::shared_ptr<dlock::IOperator> backend) {
  auto lock = dlock::LockBuilder().backend(std::move(backend)).build();
  if (!lock->tryLock("nightly")) return;
  lock.reset();  // closes the lock: "nightly" is released now ("released 'nightly' ... at close")
}

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/spdlog.h>

void routeDlockLogs() {  // at start-up, before the first connect() or build()
  auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>("/var/log/orders/dlock.log");
  auto logger = std::make_shared<spdlog::logger>("dlock", sink);
  logger->set_level(spdlog::level::info);
  spdlog::register_logger(logger);  // dlock uses this one from now on
}

void debugDlock() { spdlog::get("dlock")->set_level(spdlog::level::debug); }

#include <dlock/core/Metrics.h>

template <class Server>  // cpp-httplib's shape: server.Get(path, handler(request, response))
void serveLockMetrics(Server& server, std::vector<std::shared_ptr<dlock::ILock>> locks) {
  server.Get("/metrics", [locks](const auto& /*request*/, auto& response) {
    response.set_content(dlock::formatMetrics(locks), dlock::kMetricsContentType);
  });
}

#include <dlock/connect.h>
#include <dlock/core/SemaphoreBuilder.h>

std::shared_ptr<dlock::Semaphore> makePaymentsCap() {
  return dlock::SemaphoreBuilder()
      .backend(dlock::connect("redis://127.0.0.1:6379"))
      .name("payments-api")
      .permits(8)  // stored with the semaphore: another capacity for this name is a ConfigError
      .build();
}

bool callPayments(dlock::Semaphore& payments) {
  dlock::AcquireOptions wait;
  wait.waitTime = std::chrono::seconds(5);
  dlock::PermitLease permit = payments.acquire(1, wait);  // in line with every other process
  if (!permit) return false;  // 8 calls in flight for 5 s: try later
  // ... call the API; the watchdog renews the permit while the call runs ...
  return true;
}  // the permit goes back here, and the next waiter in line gets it
#include <chrono>
#include <memory>
#include <thread>

#include <dlock/core/LockBuilder.h>
#include <dlock/memory/MemoryOperator.h>
#include <dlock/memory/VirtualClock.h>

using namespace std::chrono_literals;

// True: a 30 s tryLock of a key held elsewhere timed out, in well under 10 ms of real time.
bool waitsOutThirtySeconds() {
  auto clock = std::make_shared<dlock::VirtualClock>();
  auto backend = std::make_shared<dlock::MemoryOperator>(clock);
  (void)backend->lock("k", "another-owner", 1h);
  auto lock = dlock::LockBuilder().backend(backend).clock(clock).leaseTime(60s).build();
  bool timedOut = false;
  std::thread worker([&] { timedOut = !lock->tryLock("k", 30s); });
  const bool waiting = clock->awaitSleepers(1);  // the worker sleeps on the clock
  clock->advance(30s);                            // its deadline: the wait has run out
  worker.join();
  return waiting && timedOut;
}

// clang-format on

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

  TEST_CASE("the reference's virtual-time snippet waits out a 30 s tryLock on the memory backend") {
    CHECK(waitsOutThirtySeconds());
  }
}
