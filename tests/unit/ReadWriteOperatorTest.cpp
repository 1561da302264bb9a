// SPDX-License-Identifier: Apache-2.0
// The read-write lock's backend surface on the memory operator and a virtual clock: the cases of
// ReadWriteScenarios.h (which also run on a real redis-server), and what only memory shows.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "ReadWriteScenarios.h"
#include "dlock/LockError.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/memory/VirtualClock.h"

using namespace std::chrono_literals;
namespace rw = dlock::test::rw;

namespace {

struct MemoryReadWriteFixture {
  std::shared_ptr<dlock::VirtualClock> clock = std::make_shared<dlock::VirtualClock>();
  std::shared_ptr<dlock::MemoryOperator> backend = std::make_shared<dlock::MemoryOperator>(clock);
  dlock::IReadWriteOperator& readWrite = *backend;
  rw::PassTime passTime = [this](std::chrono::milliseconds step) { clock->advance(step); };
  std::function<long long()> calls = [this] { return static_cast<long long>(backend->calls()); };
};

}  // namespace

TEST_SUITE("ReadWriteOperator") {
  DLOCK_READ_WRITE_CASES(MemoryReadWriteFixture, " on memory")

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a writer's fence rises with each write, and a reader gets the last write's") {
    CHECK(readWrite.acquireRead("fence", rw::kR1, 10s, 5s).fencingToken == 0);  // no write yet
    REQUIRE(readWrite.releaseRead("fence", rw::kR1).released);
    std::uint64_t last = 0;
    for (const std::string& writer : {rw::kW1, rw::kW2}) {
      const dlock::FairAcquireResult write = readWrite.acquireWrite("fence", writer, 10s, 5s);
      REQUIRE(write.acquired);
      CHECK(write.fencingToken > last);
      last = write.fencingToken;
      REQUIRE(readWrite.releaseWrite("fence", writer).released);
      CHECK(readWrite.acquireRead("fence", rw::kR2, 10s, 5s).fencingToken == last);
      REQUIRE(readWrite.releaseRead("fence", rw::kR2).released);
    }
    CHECK(readWrite.inspectReadWrite("fence").fencingToken == last);
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "injected faults reach the read-write calls, and a restart forgets holds but not fences") {
    backend->failNextCalls(1);
    CHECK_THROWS_AS((void)readWrite.acquireWrite("fault", rw::kW1, 10s, 5s), dlock::ConnectionError);
    const dlock::FairAcquireResult write = readWrite.acquireWrite("fault", rw::kW1, 10s, 5s);
    REQUIRE(write.acquired);
    backend->forgetLeases();
    CHECK_FALSE(readWrite.inspectReadWrite("fault").writer.has_value());
    const dlock::FairAcquireResult next = readWrite.acquireWrite("fault", rw::kW2, 10s, 5s);
    REQUIRE(next.acquired);
    CHECK(next.fencingToken > write.fencingToken);
  }
}
