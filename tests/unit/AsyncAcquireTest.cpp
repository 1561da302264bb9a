// SPDX-License-Identifier: Apache-2.0
// acquireAsync (dlock/async.h) on the memory backend: completions, timeouts, cancels, close(),
// fork, and many pending acquires on a constant number of threads.
#include <doctest/doctest.h>

#include <atomic>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "Eventually.h"
#include "AsyncScenarios.h"
#include "ExceptionPtrTsan.h"
#include "Fixtures.h"
#include "ForkedChild.h"
#include "dlock/LockError.h"
#include "dlock/async.h"

using namespace std::chrono_literals;
using dlock::test::eventually;
using dlock::AcquireOptions;
using dlock::Lease;

namespace {

std::shared_ptr<dlock::ILock> memoryLock(const std::shared_ptr<dlock::MemoryOperator>& backend) {
  return dlock::LockBuilder().backend(backend).build();
}

AcquireOptions waitingAtMost(std::chrono::milliseconds wait) {
  AcquireOptions options;
  options.waitTime = wait;
  return options;
}

// Cancels `source` inside the try that takes the key: the grant races the cancel.
class CancellingOperator final : public dlock::test::ForwardingOperator {
 public:
  CancellingOperator(std::shared_ptr<dlock::MemoryOperator> inner, dlock::CancelSource source)
      : ForwardingOperator(std::move(inner)), source_(std::move(source)) {}
  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    dlock::AcquireResult result = inner_->lock(key, token, ttl);
    if (result.acquired) source_.requestCancel();
    return result;
  }
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }

 private:
  dlock::CancelSource source_;
};

// Unreachable for the first `failures` acquire calls (every one when negative).
class FlakyOperator final : public dlock::test::ForwardingOperator {
 public:
  FlakyOperator(std::shared_ptr<dlock::MemoryOperator> inner, int failures)
      : ForwardingOperator(std::move(inner)), failures_(failures) {}
  dlock::AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override {
    if (failures_ < 0 || calls_.fetch_add(1) < failures_) throw dlock::ConnectionError("flaky://: unreachable");
    return inner_->lock(key, token, ttl);
  }
  std::unique_ptr<dlock::IReleaseWatch> watch(std::string_view key) override { return inner_->watch(key); }
  [[nodiscard]] int calls() const { return calls_.load(); }

 private:
  const int failures_;
  std::atomic<int> calls_{0};
};

}  // namespace

TEST_SUITE("AsyncAcquire") {
  TEST_CASE("an outage in a wait is ridden out, as the sync wait does") {
    auto flaky = std::make_shared<FlakyOperator>(std::make_shared<dlock::MemoryOperator>(), 3);
    auto lock = dlock::LockBuilder().backend(flaky).build();
    Lease lease = lock->acquireAsync("job", waitingAtMost(60s)).get();
    CHECK(lease.isHeld());
    CHECK(flaky->calls() == 4);  // three failures, then the try that took it
  }

  TEST_CASE("an outage lasting past the wait's deadline completes with ConnectionError, as the sync wait throws") {
    auto lock = dlock::LockBuilder().backend(std::make_shared<FlakyOperator>(std::make_shared<dlock::MemoryOperator>(), -1)).build();
    CHECK_THROWS_AS(lock->acquire("job", waitingAtMost(50ms)), dlock::ConnectionError);
    CHECK_THROWS_AS(lock->acquireAsync("job", waitingAtMost(50ms)).get(), dlock::ConnectionError);
    CHECK_THROWS_AS(lock->acquireAsync("job", waitingAtMost(0ms)).get(), dlock::ConnectionError);  // a single try
  }

  TEST_CASE("acquireAsync of a free key completes with a held lease") {
    auto lock = memoryLock(std::make_shared<dlock::MemoryOperator>());
    Lease lease = lock->acquireAsync("job").get();
    REQUIRE(lease);
    CHECK(lease.isHeld());
    CHECK(lease.key() == "job");
    CHECK_FALSE(lock->acquire("job", waitingAtMost(0ms)));
  }

  TEST_CASE("a pending acquire completes once the holder releases, on the completion thread") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = memoryLock(backend);
    Lease held = lock->acquire("job");
    std::promise<std::thread::id> ranOn;
    std::atomic<int> calls{0};
    std::promise<Lease> got;
    lock->acquireAsync("job", {}, [&](Lease lease, std::exception_ptr error) {
      ++calls;
      CHECK_FALSE(error);
      ranOn.set_value(std::this_thread::get_id());
      got.set_value(std::move(lease));
    });
    auto future = got.get_future();
    CHECK(future.wait_for(0ms) == std::future_status::timeout);  // the key is still taken
    const std::uint64_t first = held.fencingToken();
    held.release();
    Lease lease = future.get();
    REQUIRE(lease);
    CHECK(lease.fencingToken() > first);
    const bool elsewhere = ranOn.get_future().get() != std::this_thread::get_id();
    CHECK(elsewhere);
    CHECK(calls == 1);
  }

  TEST_CASE("a wait that runs out completes with an empty lease, as the sync acquire returns") {
    auto lock = memoryLock(std::make_shared<dlock::MemoryOperator>());
    Lease held = lock->acquire("job");
    CHECK_FALSE(lock->acquire("job", waitingAtMost(20ms)));
    CHECK_FALSE(lock->acquireAsync("job", waitingAtMost(20ms)).get());
    CHECK_FALSE(lock->acquireAsync("job", waitingAtMost(0ms)).get());  // a single try
    CHECK(held.isHeld());
  }

  TEST_CASE("a cancelled pending acquire completes with InterruptedError and leaves no hold") {
    auto lock = memoryLock(std::make_shared<dlock::MemoryOperator>());
    Lease held = lock->acquire("job");
    dlock::CancelSource cancel;
    AcquireOptions options;
    options.cancel = cancel.token();
    auto future = lock->acquireAsync("job", options);
    CHECK(future.wait_for(0ms) == std::future_status::timeout);
    cancel.requestCancel();
    CHECK_THROWS_AS(future.get(), dlock::InterruptedError);
    held.release();
    CHECK(lock->acquire("job", waitingAtMost(0ms)));  // nobody took it for the cancelled one
    // Cancelled before it starts: nothing is tried.
    CHECK_THROWS_AS(lock->acquireAsync("other", options).get(), dlock::InterruptedError);
    CHECK(lock->acquire("other", waitingAtMost(0ms)));
  }

  TEST_CASE("a grant racing the cancel is released before the operation completes with InterruptedError") {
    auto inner = std::make_shared<dlock::MemoryOperator>();
    dlock::CancelSource cancel;
    auto lock = dlock::LockBuilder().backend(std::make_shared<CancellingOperator>(inner, cancel)).build();
    AcquireOptions options;
    options.cancel = cancel.token();
    CHECK_THROWS_AS(lock->acquireAsync("job", options).get(), dlock::InterruptedError);
    CHECK(memoryLock(inner)->acquire("job", waitingAtMost(0ms)));
  }

  TEST_CASE("close() completes pending acquires with InterruptedError and refuses new ones") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    Lease held = holder->acquire("job");
    std::vector<std::future<Lease>> pending;
    for (int i = 0; i < 50; ++i) pending.push_back(lock->acquireAsync("job"));
    lock->close();
    for (auto& future : pending) CHECK_THROWS_AS(future.get(), dlock::InterruptedError);
    CHECK_THROWS_AS(lock->acquireAsync("job").get(), dlock::InterruptedError);
    CHECK(held.isHeld());
  }

  TEST_CASE("destroying the lock completes its pending acquires with InterruptedError") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    Lease held = holder->acquire("job");
    std::future<Lease> pending;
    {
      auto lock = memoryLock(backend);
      pending = lock->acquireAsync("job");
    }
    CHECK_THROWS_AS(pending.get(), dlock::InterruptedError);
  }

#if DLOCK_TEST_FORK_WITH_THREADS
  TEST_CASE("a forked child has none of its parent's pending acquires") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    dlock::test::ForkedChild child([&] {
      // The child's lock starts empty: its close() completes nothing of the parent's, and it
      // acquires on its own threads (the child's memory backend is a new, empty one).
      Lease mine = lock->acquireAsync("job", waitingAtMost(0ms)).get();
      lock->close();
      return mine ? 0 : 1;
    });
    CHECK(child.exitStatus(60s) == 0);
    CHECK(pending.wait_for(0ms) == std::future_status::timeout);
    held.release();
    CHECK(pending.get());
  }
#endif

  TEST_CASE("2000 pending acquires over 100 keys: constant threads, each completes once, cancelled ones hold nothing") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = memoryLock(backend);
    auto lock = memoryLock(backend);
    dlock::test::checkManyPendingAcquires(*lock, *holder, 2000, 100, 60s);
  }
}

namespace {


struct JoinedThread {
  std::thread thread;
  ~JoinedThread() {
    if (thread.joinable()) thread.join();
  }
};

std::shared_ptr<dlock::ILock> fairLock(const std::shared_ptr<dlock::MemoryOperator>& backend,
                                       std::chrono::milliseconds waiterLease = 5s) {
  return dlock::LockBuilder().backend(backend).fair().waiterLease(waiterLease).build();
}

}  // namespace

TEST_SUITE("AsyncAcquireFair") {
  TEST_CASE("a fair lock's pending async acquire gets the key once the holder releases") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = fairLock(backend);
    auto lock = fairLock(backend);
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    CHECK(pending.wait_for(0ms) == std::future_status::timeout);
    held.release();
    CHECK(pending.get());
  }

  TEST_CASE("an async waiter holds a place in the fair queue: a sync waiter queued after it gets the key after it") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = fairLock(backend);
    auto lock = fairLock(backend);
    std::mutex orderMutex;
    std::vector<std::string> order;
    std::promise<void> asyncDone;
    JoinedThread sync;  // joined after `held` is released, whatever fails first
    Lease held = holder->acquire("job");
    lock->acquireAsync("job", {}, [&](Lease lease, std::exception_ptr error) {
      REQUIRE_FALSE(error);
      {
        std::lock_guard<std::mutex> guard(orderMutex);
        order.emplace_back("async");
      }
      lease.release();
      asyncDone.set_value();
    });
    REQUIRE(eventually([&] { return backend->queued("job") == 1; }));
    sync.thread = std::thread([&] {
      Lease lease = holder->acquire("job");
      std::lock_guard<std::mutex> guard(orderMutex);
      order.emplace_back("sync");
    });
    REQUIRE(eventually([&] { return backend->queued("job") == 2; }));
    held.release();  // handed to the head of the queue: the async waiter
    asyncDone.get_future().get();
    sync.thread.join();
    CHECK(order == std::vector<std::string>{"async", "sync"});
  }

  TEST_CASE("a cancelled async fair waiter has left its place when it completes") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = fairLock(backend);
    auto lock = fairLock(backend);
    Lease held = holder->acquire("job");
    dlock::CancelSource cancel;
    AcquireOptions options;
    options.cancel = cancel.token();
    auto pending = lock->acquireAsync("job", options);
    REQUIRE(eventually([&] { return backend->queued("job") == 1; }));
    cancel.requestCancel();
    CHECK_THROWS_AS(pending.get(), dlock::InterruptedError);
    CHECK(backend->queued("job") == 0);
  }

  TEST_CASE("an async fair waiter whose wait runs out has left its place when it completes empty") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = fairLock(backend);
    auto lock = fairLock(backend);
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job", waitingAtMost(100ms));
    CHECK_FALSE(pending.get());
    CHECK(backend->queued("job") == 0);
    held.release();
    CHECK(lock->acquire("job", waitingAtMost(0ms)));  // nobody was left queued ahead
  }

  TEST_CASE("an async fair waiter renews its place: it keeps it past several waiter leases") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = fairLock(backend, 600ms);
    auto lock = fairLock(backend, 600ms);
    Lease held = holder->acquire("job");
    auto pending = lock->acquireAsync("job");
    REQUIRE(eventually([&] { return backend->queued("job") == 1; }));
    std::this_thread::sleep_for(2s);  // past three waiter leases
    // A try by another lock prunes the places whose lease ended: the async waiter's is live.
    CHECK_FALSE(lock->acquire("job", waitingAtMost(0ms)));
    CHECK(backend->queued("job") == 1);
    held.release();
    Lease lease = pending.get();
    CHECK(lease.isHeld());
  }
}
