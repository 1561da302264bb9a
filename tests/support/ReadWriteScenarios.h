// SPDX-License-Identifier: Apache-2.0
// ReadWriteScenarios.h — the read-write lock's decisions, checked through IReadWriteOperator alone,
// so the memory operator (tests/unit/ReadWriteOperatorTest.cpp) and a real redis-server
// (tests/integration/ReadWriteOnRedisTest.cpp) run the same cases. Each takes the operator and a
// name of its own; `passTime(d)` returns once the backend's clock has moved on by at least `d`
// (a virtual clock advanced; a server's TIME waited for). DLOCK_READ_WRITE_CASES makes them the
// test cases of a suite.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "dlock/IReadWriteOperator.h"
#include "dlock/LockError.h"

namespace dlock::test::rw {

using namespace std::chrono_literals;
using PassTime = std::function<void(std::chrono::milliseconds)>;

inline const std::string kR1(32, 'a');
inline const std::string kR2(32, 'b');
inline const std::string kR3(32, 'c');
inline const std::string kW1(32, 'd');
inline const std::string kW2(32, 'e');

// A grant `token` hears (its watch taken before the release that admits it).
inline Grant heard(IGrantWatch& watch) { return watch.waitForGrant(30s); }

inline void readersShareAndAWriterExcludes(IReadWriteOperator& rw, const std::string& name) {
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  REQUIRE(rw.acquireRead(name, kR2, 10s, 5s).acquired);
  const FairAcquireResult writer = rw.acquireWrite(name, kW1, 10s, 0ms);
  CHECK_FALSE(writer.acquired);
  CHECK(writer.position == 0);  // a try without a waiter lease is never queued
  CHECK(writer.holderTtl > 0ms);
  CHECK(writer.holderTtl <= 10s);
  const ReadWriteInfo info = rw.inspectReadWrite(name);
  CHECK_FALSE(info.writer.has_value());
  CHECK(info.readers.size() == 2);
  CHECK(info.waiters.empty());
  CHECK(rw.releaseRead(name, kR1).released);
  CHECK(rw.releaseRead(name, kR2).released);

  const FairAcquireResult write = rw.acquireWrite(name, kW1, 10s, 5s);
  REQUIRE(write.acquired);
  CHECK(write.fencingToken > 0);
  CHECK_FALSE(rw.acquireRead(name, kR1, 10s, 0ms).acquired);
  CHECK_FALSE(rw.acquireWrite(name, kW2, 10s, 0ms).acquired);
  REQUIRE(rw.inspectReadWrite(name).writer.has_value());
  CHECK(rw.inspectReadWrite(name).writer->token == kW1);
  CHECK(rw.releaseWrite(name, kW1).released);
}

// Once a writer waits, a new reader queues behind it (Redisson's read admits readers whatever waits).
inline void aReaderArrivingWhileAWriterWaitsQueues(IReadWriteOperator& rw, const std::string& name) {
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  const FairAcquireResult writer = rw.acquireWrite(name, kW1, 10s, 5s);
  REQUIRE_FALSE(writer.acquired);
  CHECK(writer.position == 1);
  const FairAcquireResult reader = rw.acquireRead(name, kR2, 10s, 5s);
  CHECK_FALSE(reader.acquired);
  CHECK(reader.position == 2);
  auto writerHears = rw.watchReadWriteGrants(name, kW1);
  auto readerHears = rw.watchReadWriteGrants(name, kR2);
  const ReleaseResult release = rw.releaseRead(name, kR1);
  CHECK(release.released);
  CHECK(release.notified == 1);  // the writer alone
  const Grant toWriter = heard(*writerHears);
  REQUIRE(toWriter.kind == Grant::Kind::Granted);
  CHECK(toWriter.fencingToken > 0);
  CHECK(toWriter.lease > 0ms);
  CHECK(toWriter.lease <= 5s);  // the rest of its waiter lease, under its ttl
  CHECK_FALSE(rw.acquireRead(name, kR2, 10s, 5s).acquired);  // still behind the writer
  CHECK(rw.releaseWrite(name, kW1).notified == 1);
  const Grant toReader = heard(*readerHears);
  REQUIRE(toReader.kind == Grant::Kind::Granted);
  CHECK(toReader.fencingToken == toWriter.fencingToken);  // a reader gets the last write's fence
  CHECK(rw.acquireRead(name, kR2, 10s, 5s).acquired);     // ours already: the same answer
  CHECK(rw.releaseRead(name, kR2).released);
}

// A release admits every reader at the head at once, and stops at the first writer.
inline void aReleaseAdmitsEveryReaderAtTheHead(IReadWriteOperator& rw, const std::string& name) {
  const FairAcquireResult first = rw.acquireWrite(name, kW1, 10s, 5s);
  REQUIRE(first.acquired);
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).position == 1);
  REQUIRE(rw.acquireRead(name, kR2, 10s, 5s).position == 2);
  REQUIRE(rw.acquireWrite(name, kW2, 10s, 5s).position == 3);
  REQUIRE(rw.acquireRead(name, kR3, 10s, 5s).position == 4);
  auto r1 = rw.watchReadWriteGrants(name, kR1);
  auto r2 = rw.watchReadWriteGrants(name, kR2);
  CHECK(rw.releaseWrite(name, kW1).notified == 2);
  for (auto* watch : {r1.get(), r2.get()}) {
    const Grant grant = heard(*watch);
    CHECK(grant.kind == Grant::Kind::Granted);
    CHECK(grant.fencingToken == first.fencingToken);
  }
  ReadWriteInfo info = rw.inspectReadWrite(name);
  CHECK(info.readers.size() == 2);
  REQUIRE(info.waiters.size() == 2);
  CHECK(info.waiters[0].token == kW2);
  CHECK(info.waiters[0].mode == ReadWriteMode::Write);
  CHECK(info.waiters[1].token == kR3);
  CHECK(rw.releaseRead(name, kR1).notified == 0);  // a reader still holds
  auto w2 = rw.watchReadWriteGrants(name, kW2);
  CHECK(rw.releaseRead(name, kR2).notified == 1);
  const Grant toWriter = heard(*w2);
  REQUIRE(toWriter.kind == Grant::Kind::Granted);
  CHECK(toWriter.fencingToken > first.fencingToken);
  CHECK(rw.releaseWrite(name, kW2).notified == 1);
  info = rw.inspectReadWrite(name);
  REQUIRE(info.readers.size() == 1);
  CHECK(info.readers[0].token == kR3);
  CHECK(info.fencingToken == toWriter.fencingToken);
  CHECK(rw.releaseRead(name, kR3).released);
}

// curator#1138: W holds the write, W2 queues, W downgrades. W2 must not get in before W's read
// hold ends, whether W downgrades in one call or takes the read and then releases the write.
inline void aDowngradeKeepsItsPlace(IReadWriteOperator& rw, const std::string& name, bool oneCall) {
  const FairAcquireResult write = rw.acquireWrite(name, kW1, 10s, 5s);
  REQUIRE(write.acquired);
  REQUIRE(rw.acquireWrite(name, kW2, 10s, 5s).position == 1);
  if (oneCall) {
    CHECK(rw.downgrade(name, kW1, 10s));
  } else {
    const FairAcquireResult read = rw.acquireRead(name, kW1, 10s, 5s);  // at once, though W2 waits
    CHECK(read.acquired);
    CHECK(read.fencingToken == write.fencingToken);
    const ReleaseResult release = rw.releaseWrite(name, kW1);
    CHECK(release.released);
    CHECK(release.notified == 0);
  }
  ReadWriteInfo info = rw.inspectReadWrite(name);
  CHECK_FALSE(info.writer.has_value());
  REQUIRE(info.readers.size() == 1);
  CHECK(info.readers[0].token == kW1);
  CHECK_FALSE(rw.acquireWrite(name, kW2, 10s, 5s).acquired);
  CHECK(rw.extendReadWrite({name, kW1, ReadWriteMode::Read}, 10s));  // redisson#4217: a downgraded read renews
  CHECK(rw.acquireRead(name, kR1, 10s, 5s).position == 2);          // behind the waiting writer
  auto w2 = rw.watchReadWriteGrants(name, kW2);
  CHECK(rw.releaseRead(name, kW1).notified == 1);
  CHECK(heard(*w2).kind == Grant::Kind::Granted);
  info = rw.inspectReadWrite(name);
  REQUIRE(info.writer.has_value());
  CHECK(info.writer->token == kW2);
  CHECK(rw.releaseWrite(name, kW2).notified == 1);  // then the reader
  CHECK(rw.releaseRead(name, kR1).released);
}

// Only the sole reader becomes the writer, at once; everything else is refused without a place.
inline void anUpgradeIsRefusedUnlessSoleReader(IReadWriteOperator& rw, const std::string& name) {
  const FairAcquireResult before = rw.acquireWrite(name, kW1, 10s, 5s);
  REQUIRE(before.acquired);
  CHECK_FALSE(rw.tryUpgrade(name, kR1, 10s).acquired);  // a writer holds; R1 is no reader
  REQUIRE(rw.releaseWrite(name, kW1).released);
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  REQUIRE(rw.acquireRead(name, kR2, 10s, 5s).acquired);
  const FairAcquireResult refused = rw.tryUpgrade(name, kR1, 10s);
  CHECK_FALSE(refused.acquired);
  CHECK(refused.position == 0);
  CHECK(refused.holderTtl > 0ms);
  const FairAcquireResult asWriter = rw.acquireWrite(name, kR1, 10s, 5s);  // would wait for itself
  CHECK_FALSE(asWriter.acquired);
  CHECK(asWriter.position == 0);
  CHECK(rw.inspectReadWrite(name).waiters.empty());
  REQUIRE(rw.releaseRead(name, kR2).released);
  const FairAcquireResult upgraded = rw.tryUpgrade(name, kR1, 10s);
  CHECK(upgraded.acquired);
  CHECK(upgraded.fencingToken > before.fencingToken);
  const ReadWriteInfo info = rw.inspectReadWrite(name);
  REQUIRE(info.writer.has_value());
  CHECK(info.writer->token == kR1);
  CHECK(info.readers.empty());
  CHECK_FALSE(rw.tryUpgrade(name, kR2, 10s).acquired);
  CHECK(rw.releaseWrite(name, kR1).released);
}

// Holds end at their lease, by the backend's clock, and every call reclaims them.
inline void holdsAndPlacesEndByTheBackendsClock(IReadWriteOperator& rw, const std::string& name,
                                                const PassTime& passTime) {
  REQUIRE(rw.acquireRead(name, kR1, 200ms, 5s).acquired);
  REQUIRE(rw.acquireRead(name, kR2, 60s, 5s).acquired);
  REQUIRE(rw.acquireWrite(name, kW1, 60s, 200ms).position == 1);  // its place ends in 200 ms
  CHECK(rw.extendReadWrite({name, kR2, ReadWriteMode::Read}, 200ms));  // R2's own hold only
  passTime(250ms);
  CHECK_FALSE(rw.extendReadWrite({name, kR1, ReadWriteMode::Read}, 10s));
  CHECK_FALSE(rw.releaseRead(name, kR1).released);  // ended: not released by this call
  const ReadWriteInfo info = rw.inspectReadWrite(name);
  CHECK(info.readers.empty());
  CHECK(info.waiters.empty());
  const FairAcquireResult reader = rw.acquireRead(name, kR3, 10s, 5s);  // no writer waits any more
  CHECK(reader.acquired);
  REQUIRE(rw.releaseRead(name, kR3).released);
  const FairAcquireResult writer = rw.acquireWrite(name, kW2, 200ms, 5s);
  REQUIRE(writer.acquired);
  passTime(250ms);
  CHECK(rw.acquireWrite(name, kW1, 10s, 5s).acquired);  // the writer's lease ended: free
  CHECK_FALSE(rw.releaseWrite(name, kW2).released);
  CHECK(rw.releaseWrite(name, kW1).released);
}

// A retried attempt gets the same answer; a grant whose message was lost is found by the recheck.
inline void anAcquireIsIdempotentForItsToken(IReadWriteOperator& rw, const std::string& name) {
  const FairAcquireResult write = rw.acquireWrite(name, kW1, 10s, 5s);
  REQUIRE(write.acquired);
  const FairAcquireResult again = rw.acquireWrite(name, kW1, 10s, 5s);
  CHECK(again.acquired);
  CHECK(again.fencingToken == write.fencingToken);
  CHECK(again.validity > 0ms);
  CHECK(again.validity <= 10s);
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).position == 1);
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).position == 1);  // renewing the place keeps it
  CHECK(rw.inspectReadWrite(name).waiters.size() == 1);
  REQUIRE(rw.releaseWrite(name, kW1).notified == 1);  // nobody listened: the message is gone
  const FairAcquireResult recheck = rw.acquireRead(name, kR1, 10s, 5s);
  CHECK(recheck.acquired);
  CHECK(recheck.fencingToken == write.fencingToken);
  CHECK(recheck.validity > 0ms);
  CHECK(rw.inspectReadWrite(name).readers.size() == 1);
  CHECK(rw.releaseRead(name, kR1).released);
}

// A leave releases a hold granted to it meanwhile (and hands it on); the token is refused after.
inline void aLeaveReleasesARacingGrantAndLeavesATombstone(IReadWriteOperator& rw, const std::string& name) {
  REQUIRE(rw.acquireWrite(name, kW1, 10s, 5s).acquired);
  REQUIRE(rw.acquireWrite(name, kW2, 10s, 5s).position == 1);
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).position == 2);
  REQUIRE(rw.releaseWrite(name, kW1).notified == 1);  // handed to W2 ...
  auto r1 = rw.watchReadWriteGrants(name, kR1);
  CHECK(rw.leaveReadWriteQueue(name, kW2, ReadWriteMode::Write, 10s));  // ... whose wait ended
  CHECK(heard(*r1).kind == Grant::Kind::Granted);
  ReadWriteInfo info = rw.inspectReadWrite(name);
  CHECK_FALSE(info.writer.has_value());
  REQUIRE(info.readers.size() == 1);
  CHECK(info.readers[0].token == kR1);
  // W2's attempt, still on its way when it left, arrives now: refused, and no place.
  const FairAcquireResult late = rw.acquireWrite(name, kW2, 10s, 5s);
  CHECK_FALSE(late.acquired);
  CHECK(late.position == 0);
  CHECK(rw.inspectReadWrite(name).waiters.empty());
  CHECK(rw.releaseRead(name, kR1).released);
  CHECK_FALSE(rw.acquireRead(name, kW2, 10s, 5s).acquired);  // free now, and still refused
  const ReleaseResult release = rw.releaseWrite(name, kW2);
  CHECK_FALSE(release.released);  // a tombstone is no evidence of a release
  CHECK_FALSE(release.releasedEarlier);
  CHECK_FALSE(rw.leaveReadWriteQueue(name, kR2, ReadWriteMode::Read, 10s));  // never queued
  CHECK_FALSE(rw.acquireRead(name, kR2, 10s, 5s).acquired);
}

// A release checks the owner, and a retried one is decided by the record of its own mode.
inline void aReleaseChecksTheOwnerAndAnswersRetriesFromItsRecord(IReadWriteOperator& rw, const std::string& name) {
  REQUIRE(rw.acquireWrite(name, kW1, 10s, 5s).acquired);
  CHECK_FALSE(rw.releaseWrite(name, kW2).released);
  CHECK_FALSE(rw.releaseRead(name, kW1).released);  // W1 holds no read
  REQUIRE(rw.inspectReadWrite(name).writer.has_value());
  CHECK_FALSE(rw.acquireRead(name, kR1, 10s, 0ms).acquired);
  CHECK(rw.releaseWrite(name, kW1).released);
  const ReleaseResult retried = rw.releaseWrite(name, kW1);
  CHECK(retried.released);
  CHECK(retried.releasedEarlier);
  CHECK_FALSE(rw.releaseRead(name, kW1).released);  // a write's record says nothing of a read
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  REQUIRE(rw.acquireRead(name, kR2, 10s, 5s).acquired);
  CHECK_FALSE(rw.releaseRead(name, kR3).released);
  CHECK_FALSE(rw.releaseWrite(name, kR1).released);
  CHECK(rw.inspectReadWrite(name).readers.size() == 2);
  CHECK(rw.releaseRead(name, kR1).released);
  CHECK(rw.releaseRead(name, kR1).releasedEarlier);
  // The token reads again: its earlier release is no evidence for the new hold's.
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  CHECK(rw.releaseRead(name, kR1).released);
  CHECK(rw.releaseRead(name, kR2).released);
}

// Each renewal renews the token's own hold of its mode, in one batch over several names.
inline void aBatchRenewsEachTokensOwnHold(IReadWriteOperator& rw, const std::string& name) {
  const std::string other = name + ":other";
  REQUIRE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  REQUIRE(rw.acquireWrite(other, kW1, 10s, 5s).acquired);
  const std::vector<ExtendResult> results = rw.extendReadWriteAll(
      {{name, kR1, ReadWriteMode::Read},
       {name, kR1, ReadWriteMode::Write},  // not a writer
       {name, kR2, ReadWriteMode::Read},   // not a reader (PR #7098: no renewing another's)
       {other, kW1, ReadWriteMode::Write},
       {other, kW1, ReadWriteMode::Read}},
      60s);
  REQUIRE(results.size() == 5);
  CHECK(results[0].extended);
  CHECK_FALSE(results[1].extended);
  CHECK_FALSE(results[2].extended);
  CHECK(results[3].extended);
  CHECK_FALSE(results[4].extended);
  for (const auto& result : results) CHECK_FALSE(result.unknown);
  const ReadWriteInfo info = rw.inspectReadWrite(name);
  REQUIRE(info.readers.size() == 1);
  CHECK(info.readers[0].remaining > 10s);
  REQUIRE(rw.inspectReadWrite(other).writer.has_value());
  CHECK(rw.inspectReadWrite(other).writer->remaining > 10s);
  CHECK(rw.releaseRead(name, kR1).released);
  CHECK(rw.releaseWrite(other, kW1).released);
}

// A waiter blocked on its grant watch wakes when a release admits it.
inline void aWatchWakesItsWaiterWhenAdmitted(IReadWriteOperator& rw, const std::string& name) {
  REQUIRE(rw.acquireWrite(name, kW1, 10s, 5s).acquired);
  REQUIRE_FALSE(rw.acquireRead(name, kR1, 10s, 5s).acquired);
  auto watch = rw.watchReadWriteGrants(name, kR1);
  Grant grant;
  std::thread waiter([&] { grant = watch->waitForGrant(30s); });
  const ReleaseResult release = rw.releaseWrite(name, kW1);
  waiter.join();
  CHECK(release.notified == 1);
  CHECK(grant.kind == Grant::Kind::Granted);
  CHECK(grant.lease > 0ms);
}

// Bad input is an InvalidArgumentError, thrown before anything is sent (`calls` counts what was).
inline void badInputIsRefusedBeforeAnythingIsSent(IReadWriteOperator& rw, const std::function<long long()>& calls) {
  const long long before = calls();
  const std::string longName(2000, 'k');
  CHECK_THROWS_AS((void)rw.acquireRead("", kR1, 10s, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireWrite(longName, kR1, 10s, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireRead("k", "", 10s, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireRead("k", "a|b", 10s, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireRead("k", std::string(200, 'a'), 10s, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireWrite("k", kW1, 0ms, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireWrite("k", kW1, 10s, -1ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.acquireWrite("k", kW1, kMaxLeaseTime + 1ms, 5s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.releaseRead("k", "x y"), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.releaseWrite("", kW1), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.downgrade("k", kW1, -5ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.tryUpgrade("k", "\r\n", 10s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.extendReadWrite({"k", kW1, ReadWriteMode::Write}, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.extendReadWriteAll({{"k", kW1, ReadWriteMode::Read}, {"", kW1, ReadWriteMode::Read}}, 1s),
                  InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.leaveReadWriteQueue("k", "", ReadWriteMode::Read, 1s), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.watchReadWriteGrants("k", "%s"), InvalidArgumentError);
  CHECK_THROWS_AS((void)rw.inspectReadWrite(""), InvalidArgumentError);
  CHECK(calls() == before);
}

}  // namespace dlock::test::rw

// The cases above as test cases of `Fixture`, whose members are `readWrite` (the operator),
// `passTime` and `calls` (what the backend has been sent); `where` (" on memory", " on Redis")
// keeps each suite's names its own in ctest.
#define DLOCK_READ_WRITE_CASES(Fixture, where)                                                                   \
  TEST_CASE_FIXTURE(Fixture, "readers share, and a writer excludes readers and writers" where) {                \
    ::dlock::test::rw::readersShareAndAWriterExcludes(readWrite, "share");                                      \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a reader arriving while a writer waits queues behind it" where) {                 \
    ::dlock::test::rw::aReaderArrivingWhileAWriterWaitsQueues(readWrite, "preference");                         \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a release admits every reader at the head at once, and stops at a writer" where) { \
    ::dlock::test::rw::aReleaseAdmitsEveryReaderAtTheHead(readWrite, "heads");                                  \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a downgrade in one call keeps its place: a queued writer waits for its read" where) { \
    ::dlock::test::rw::aDowngradeKeepsItsPlace(readWrite, "down", true);                                        \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a read taken while writing, then the write released, keeps the place" where) {    \
    ::dlock::test::rw::aDowngradeKeepsItsPlace(readWrite, "down", false);                                       \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "an upgrade is refused at once unless the token is the sole reader" where) {       \
    ::dlock::test::rw::anUpgradeIsRefusedUnlessSoleReader(readWrite, "up");                                     \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "holds and waiter places end by the backend's clock" where) {                      \
    ::dlock::test::rw::holdsAndPlacesEndByTheBackendsClock(readWrite, "expiry", passTime);                      \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "an acquire is idempotent for its token, and a lost grant is found by the recheck" where) { \
    ::dlock::test::rw::anAcquireIsIdempotentForItsToken(readWrite, "again");                                    \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a leave releases a grant that raced it and leaves a tombstone" where) {           \
    ::dlock::test::rw::aLeaveReleasesARacingGrantAndLeavesATombstone(readWrite, "leave");                       \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a release checks the owner, and a retried release is answered by its record" where) { \
    ::dlock::test::rw::aReleaseChecksTheOwnerAndAnswersRetriesFromItsRecord(readWrite, "owner");                \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a batch renewal renews each token's own hold of its mode only" where) {           \
    ::dlock::test::rw::aBatchRenewsEachTokensOwnHold(readWrite, "batch");                                       \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a waiter blocked on its grant watch wakes when a release admits it" where) {    \
    ::dlock::test::rw::aWatchWakesItsWaiterWhenAdmitted(readWrite, "wake");                                     \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "bad input is an InvalidArgumentError with nothing sent" where) {                  \
    ::dlock::test::rw::badInputIsRefusedBeforeAnythingIsSent(readWrite, calls);                                 \
  }
