// SPDX-License-Identifier: Apache-2.0
// acquireAsync on a read-write lock's sides (memory backend): an async reader or writer holds a
// place in the name's queue, as a sync one does; writer preference and the order hold across
// them; a cancelled one has left the queue when it completes.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

#include "Eventually.h"
#include "dlock/LockError.h"
#include "dlock/async.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/ReadWriteLock.h"
#include "dlock/memory/MemoryOperator.h"

using namespace std::chrono_literals;
using dlock::test::eventually;

namespace {


std::size_t waiters(dlock::MemoryOperator& backend, const std::string& name) {
  return backend.inspectReadWrite(name).waiters.size();
}

}  // namespace

TEST_SUITE("AsyncReadWrite") {
  TEST_CASE("an async writer queued behind a reader gets the write once the reader releases") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = dlock::LockBuilder().backend(backend).buildReadWrite();
    auto rw = dlock::LockBuilder().backend(backend).buildReadWrite();
    dlock::Lease read = holder->readLock()->acquire("doc");
    auto write = rw->writeLock()->acquireAsync("doc");
    REQUIRE(eventually([&] { return waiters(*backend, "doc") == 1; }));
    CHECK(write.wait_for(0ms) == std::future_status::timeout);
    read.release();
    dlock::Lease lease = write.get();
    REQUIRE(lease);
    CHECK(lease.isHeld());
    CHECK(backend->inspectReadWrite("doc").writer.has_value());
  }

  TEST_CASE("a waiting async writer keeps new readers out, and async readers queued behind it share the key after it") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = dlock::LockBuilder().backend(backend).buildReadWrite();
    auto rw = dlock::LockBuilder().backend(backend).buildReadWrite();
    dlock::Lease read = holder->readLock()->acquire("doc");
    std::promise<std::size_t> readersBesideWrite;
    rw->writeLock()->acquireAsync("doc", {}, [&](dlock::Lease lease, std::exception_ptr error) {
      REQUIRE_FALSE(error);
      readersBesideWrite.set_value(backend->inspectReadWrite("doc").readers.size());
      lease.release();  // the readers queued behind it get in now
    });
    REQUIRE(eventually([&] { return waiters(*backend, "doc") == 1; }));
    // Writer preference: a new reader queues behind the waiting writer, async or not.
    CHECK_FALSE(holder->readLock()->acquire("doc", dlock::AcquireOptions{0ms, std::nullopt, {}}));
    auto first = rw->readLock()->acquireAsync("doc");
    auto second = rw->readLock()->acquireAsync("doc");
    REQUIRE(eventually([&] { return waiters(*backend, "doc") == 3; }));
    read.release();
    auto beside = readersBesideWrite.get_future();
    REQUIRE(beside.wait_for(30s) == std::future_status::ready);
    CHECK(beside.get() == 0);  // the writer went before the readers queued behind it
    REQUIRE(first.wait_for(30s) == std::future_status::ready);
    REQUIRE(second.wait_for(30s) == std::future_status::ready);
    dlock::Lease a = first.get();
    dlock::Lease b = second.get();
    CHECK(a.isHeld());
    CHECK(b.isHeld());  // both readers at once
    CHECK(backend->inspectReadWrite("doc").readers.size() == 2);
  }

  TEST_CASE("a cancelled async reader has left the queue when it completes") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = dlock::LockBuilder().backend(backend).buildReadWrite();
    auto rw = dlock::LockBuilder().backend(backend).buildReadWrite();
    dlock::Lease write = holder->writeLock()->acquire("doc");
    dlock::CancelSource cancel;
    dlock::AcquireOptions options;
    options.cancel = cancel.token();
    auto pending = rw->readLock()->acquireAsync("doc", options);
    REQUIRE(eventually([&] { return waiters(*backend, "doc") == 1; }));
    cancel.requestCancel();
    CHECK_THROWS_AS(pending.get(), dlock::InterruptedError);
    CHECK(waiters(*backend, "doc") == 0);
  }

  TEST_CASE("an async writer whose wait runs out has left the queue, and readers get in at once") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto holder = dlock::LockBuilder().backend(backend).buildReadWrite();
    auto rw = dlock::LockBuilder().backend(backend).buildReadWrite();
    dlock::Lease read = holder->readLock()->acquire("doc");
    dlock::AcquireOptions options;
    options.waitTime = 100ms;
    CHECK_FALSE(rw->writeLock()->acquireAsync("doc", options).get());
    CHECK(waiters(*backend, "doc") == 0);
    CHECK(rw->readLock()->acquire("doc", dlock::AcquireOptions{0ms, std::nullopt, {}}));  // no writer waits
  }
}
