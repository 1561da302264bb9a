// SPDX-License-Identifier: Apache-2.0
// The read-write lock's backend surface on the memory operator and a virtual clock: the cases of
// ReadWriteScenarios.h (which also run on a real redis-server), and what only memory shows.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

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
};

}  // namespace

TEST_SUITE("ReadWriteOperator") {
  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "readers share, and a writer excludes readers and writers") {
    rw::readersShareAndAWriterExcludes(readWrite, "share");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a reader arriving while a writer waits queues behind it") {
    rw::aReaderArrivingWhileAWriterWaitsQueues(readWrite, "preference");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a release admits every reader at the head at once, and stops at a writer") {
    rw::aReleaseAdmitsEveryReaderAtTheHead(readWrite, "heads");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a downgrade keeps its place: a queued writer waits for its read hold") {
    SUBCASE("in one call") { rw::aDowngradeKeepsItsPlace(readWrite, "down", true); }
    SUBCASE("a read taken while writing, then the write released") { rw::aDowngradeKeepsItsPlace(readWrite, "down", false); }
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "an upgrade is refused at once unless the token is the sole reader") {
    rw::anUpgradeIsRefusedUnlessSoleReader(readWrite, "up");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "holds and waiter places end by the backend's clock") {
    rw::holdsAndPlacesEndByTheBackendsClock(readWrite, "expiry", passTime);
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "an acquire is idempotent for its token, and a lost grant is found by the recheck") {
    rw::anAcquireIsIdempotentForItsToken(readWrite, "again");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a leave releases a grant that raced it and leaves a tombstone") {
    rw::aLeaveReleasesARacingGrantAndLeavesATombstone(readWrite, "leave");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a release checks the owner, and a retried release is answered by its record") {
    rw::aReleaseChecksTheOwnerAndAnswersRetriesFromItsRecord(readWrite, "owner");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a batch renewal renews each token's own hold of its mode only") {
    rw::aBatchRenewsEachTokensOwnHold(readWrite, "batch");
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "bad input is an InvalidArgumentError before the backend is called") {
    rw::badInputIsRefusedBeforeAnythingIsSent(readWrite, [this] { return static_cast<long long>(backend->calls()); });
  }

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a writer's fence rises with each write; a reader gets the last write's") {
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

  TEST_CASE_FIXTURE(MemoryReadWriteFixture, "a waiter blocked on its grant watch wakes when a release admits it") {
    REQUIRE(readWrite.acquireWrite("wake", rw::kW1, 10s, 5s).acquired);
    REQUIRE_FALSE(readWrite.acquireRead("wake", rw::kR1, 10s, 5s).acquired);
    auto watch = readWrite.watchReadWriteGrants("wake", rw::kR1);
    dlock::Grant grant;
    std::thread waiter([&] { grant = watch->waitForGrant(30s); });
    REQUIRE(readWrite.releaseWrite("wake", rw::kW1).notified == 1);
    waiter.join();
    CHECK(grant.kind == dlock::Grant::Kind::Granted);
    CHECK(grant.lease > 0ms);
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
