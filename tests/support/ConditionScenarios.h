// SPDX-License-Identifier: Apache-2.0
// ConditionScenarios.h — a lock's conditions checked through the operator's surfaces alone
// (IOperator, IFairOperator, IConditionOperator), so the memory operator
// (tests/unit/ConditionOperatorTest.cpp), a real redis-server (tests/integration/ConditionOnRedisTest.cpp)
// and a Cluster (tests/topology) run the same cases. Each takes a Backends view and a key of its
// own; `passTime(d)` returns once the backend's clock has moved on by at least `d` (a virtual
// clock advanced; a server's TIME waited for). DLOCK_CONDITION_CASES makes them the test cases of
// a suite whose fixture has `backends`, `passTime` and `calls`.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/IConditionOperator.h"
#include "dlock/IFairOperator.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"

namespace dlock::test::cond {

using namespace std::chrono_literals;
using PassTime = std::function<void(std::chrono::milliseconds)>;

inline const std::string kT1(32, '1');
inline const std::string kT2(32, '2');
inline const std::string kT3(32, '3');
inline const std::string kT4(32, '4');
inline const std::string kName = "not-empty";

// One backend through the three surfaces a condition uses.
struct Backends {
  IOperator& locks;
  IFairOperator& fair;
  IConditionOperator& conditions;
};

// What `watch` hears: a signal or a hand-off, its watch taken before the call that sends it.
inline Grant heard(IGrantWatch& watch) { return watch.waitForGrant(30s); }

// `token` holds `key` (exclusive) and awaits on kName: the key is free after it.
inline AwaitResult holdThenAwait(Backends& b, const std::string& key, const std::string& token,
                                 std::chrono::milliseconds waiterLease = 10s) {
  const AcquireResult held = b.locks.lock(key, token, 10s);
  REQUIRE(held.acquired);
  return b.conditions.await(key, kName, token, ConditionLock::Exclusive, held.fencingToken, 10s, waiterLease);
}

// As holdThenAwait on a fair key.
inline AwaitResult holdFairThenAwait(Backends& b, const std::string& key, const std::string& token) {
  const FairAcquireResult held = b.fair.fairLock(key, token, 10s, 0ms);
  REQUIRE(held.acquired);
  return b.conditions.await(key, kName, token, ConditionLock::Fair, held.fencingToken, 10s, 10s);
}

// The release and the join are one step: the key is free at the reply, and a signal sent at once
// finds the waiter, which hears it on its process's channel.
inline void awaitReleasesAndJoinsAtOnce(Backends& b, const std::string& key) {
  auto signals = b.conditions.watchSignals(key, kT1);
  const AwaitResult awaited = holdThenAwait(b, key, kT1);
  REQUIRE(awaited.awaiting);
  CHECK_FALSE(awaited.awaitingEarlier);
  CHECK(awaited.position == 1);
  REQUIRE(b.locks.lock(key, kT2, 10s).acquired);  // released by the await
  const SignalResult signalled = b.conditions.signal(key, kName, kT2, ConditionLock::Exclusive);
  CHECK(signalled.owner);
  CHECK(signalled.moved == 1);
  const Grant told = heard(*signals);
  CHECK(told.kind == Grant::Kind::Granted);
  CHECK(told.fencingToken == 0);  // nothing held: the waiter competes for the key
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  CHECK_FALSE(b.conditions.renewAwait({key, kName, kT1, 10s}, 10s));  // the recheck: signalled
  CHECK(b.locks.unlock(key, kT2).released);
  CHECK(b.locks.lock(key, kT1, 10s).acquired);  // it re-acquires with its token
  CHECK(b.locks.unlock(key, kT1).released);
}

// A retried await whose first try ran says so, and joins once; nor does it release anything.
inline void aRetriedAwaitJoinsOnce(Backends& b, const std::string& key) {
  REQUIRE(holdThenAwait(b, key, kT1).awaiting);
  const AwaitResult again = b.conditions.await(key, kName, kT1, ConditionLock::Exclusive, 1, 10s, 10s);
  CHECK(again.awaiting);
  CHECK(again.awaitingEarlier);
  CHECK(again.position == 1);
  CHECK(b.conditions.inspectCondition(key, kName).waiters.size() == 1);
  // Signalled between the tries: the release's record answers, and position 0 says it was signalled.
  REQUIRE(b.locks.lock(key, kT2, 10s).acquired);
  REQUIRE(b.conditions.signal(key, kName, kT2, ConditionLock::Exclusive).moved == 1);
  const AwaitResult late = b.conditions.await(key, kName, kT1, ConditionLock::Exclusive, 1, 10s, 10s);
  CHECK(late.awaiting);
  CHECK(late.awaitingEarlier);
  CHECK(late.position == 0);
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  CHECK(b.locks.inspect(key).held);  // nothing released: the key is T2's
}

// Not held by the token (free, or someone else's): refused, nothing joined, nothing released.
inline void anAwaitWithoutTheKeyIsRefused(Backends& b, const std::string& key) {
  for (const ConditionLock lock : {ConditionLock::Exclusive, ConditionLock::Fair}) {
    CHECK_FALSE(b.conditions.await(key, kName, kT1, lock, 1, 10s, 10s).awaiting);  // free
  }
  REQUIRE(b.locks.lock(key, kT2, 10s).acquired);
  for (const ConditionLock lock : {ConditionLock::Exclusive, ConditionLock::Fair}) {
    CHECK_FALSE(b.conditions.await(key, kName, kT1, lock, 1, 10s, 10s).awaiting);  // another's
  }
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  CHECK(b.locks.inspect(key).held);
  CHECK_FALSE(b.locks.lock(key, kT1, 10s).acquired);
  CHECK(b.locks.unlock(key, kT2).released);
}

// Only the key's holder signals: anyone else is not the owner, and the waiter stays.
inline void aSignalWithoutTheKeyIsNotTheOwners(Backends& b, const std::string& key) {
  REQUIRE(holdThenAwait(b, key, kT1).awaiting);
  for (const ConditionLock lock : {ConditionLock::Exclusive, ConditionLock::Fair}) {
    const SignalResult free = b.conditions.signal(key, kName, kT2, lock);
    CHECK_FALSE(free.owner);
    CHECK(free.moved == 0);
    CHECK_FALSE(b.conditions.signalAll(key, kName, kT2, lock).owner);
  }
  REQUIRE(b.locks.lock(key, kT3, 10s).acquired);
  CHECK_FALSE(b.conditions.signal(key, kName, kT2, ConditionLock::Exclusive).owner);
  const ConditionInfo info = b.conditions.inspectCondition(key, kName);
  REQUIRE(info.waiters.size() == 1);
  CHECK(info.waiters[0].token == kT1);
  CHECK(b.conditions.renewAwait({key, kName, kT1, 10s}, 10s));  // still waiting
}

// A waiter whose lease ended (it died, or stopped renewing) is skipped: the signal goes to the next.
inline void aSignalSkipsAWaiterWhoseLeaseEnded(Backends& b, const std::string& key, const PassTime& passTime) {
  auto first = b.conditions.watchSignals(key, kT1);
  auto second = b.conditions.watchSignals(key, kT2);
  REQUIRE(holdThenAwait(b, key, kT1, 1s).awaiting);
  REQUIRE(holdThenAwait(b, key, kT2, 30s).awaiting);
  passTime(1100ms);
  const ConditionInfo info = b.conditions.inspectCondition(key, kName);
  REQUIRE(info.waiters.size() == 1);
  CHECK(info.waiters[0].token == kT2);
  REQUIRE(b.locks.lock(key, kT3, 10s).acquired);
  const SignalResult signalled = b.conditions.signal(key, kName, kT3, ConditionLock::Exclusive);
  CHECK(signalled.moved == 1);
  CHECK(heard(*second).kind == Grant::Kind::Granted);
  CHECK(first->waitForGrant(0ms).kind == Grant::Kind::None);  // told before the second, if at all
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  CHECK(b.conditions.signal(key, kName, kT3, ConditionLock::Exclusive).moved == 0);
}

// A signal with nobody waiting is lost, as the JDK's is: a later await waits for the next one.
inline void aSignalBeforeAnyAwaitIsNotRemembered(Backends& b, const std::string& key) {
  REQUIRE(b.locks.lock(key, kT2, 10s).acquired);
  const SignalResult early = b.conditions.signal(key, kName, kT2, ConditionLock::Exclusive);
  CHECK(early.owner);
  CHECK(early.moved == 0);
  CHECK(b.conditions.signalAll(key, kName, kT2, ConditionLock::Exclusive).moved == 0);
  REQUIRE(b.locks.unlock(key, kT2).released);
  REQUIRE(holdThenAwait(b, key, kT1).awaiting);
  CHECK(b.conditions.renewAwait({key, kName, kT1, 10s}, 10s));  // still waiting
  CHECK(b.conditions.inspectCondition(key, kName).waiters.size() == 1);
}

// On a fair key the await hands the key to the queue's head, and a signal moves the longest waiter
// behind the queue (as AQS moves a node): the signaller's release hands the key to it.
inline void aSignalMovesTheLongestWaiterIntoTheFairQueue(Backends& b, const std::string& key) {
  auto grantsToT1 = b.fair.watchGrants(key, kT1);
  auto grantsToT2 = b.fair.watchGrants(key, kT2);
  const FairAcquireResult held = b.fair.fairLock(key, kT1, 10s, 0ms);
  REQUIRE(held.acquired);
  REQUIRE(b.fair.fairLock(key, kT2, 10s, 10s).position == 1);
  const AwaitResult awaited = b.conditions.await(key, kName, kT1, ConditionLock::Fair, held.fencingToken, 10s, 10s);
  REQUIRE(awaited.awaiting);
  CHECK(awaited.notified == 1);  // handed to T2
  const Grant toT2 = heard(*grantsToT2);
  REQUIRE(toT2.kind == Grant::Kind::Granted);
  REQUIRE(b.fair.fairLock(key, kT2, 10s, 10s).acquired);
  REQUIRE(b.fair.fairLock(key, kT3, 10s, 10s).position == 1);  // queued before the signal
  const SignalResult signalled = b.conditions.signal(key, kName, kT2, ConditionLock::Fair);
  CHECK(signalled.owner);
  CHECK(signalled.moved == 1);
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  CHECK_FALSE(b.conditions.renewAwait({key, kName, kT1, 10s}, 10s));  // in the queue now
  CHECK(b.fair.fairLock(key, kT1, 10s, 10s).position == 2);           // behind T3
  CHECK(b.fair.fairUnlock(key, kT2).notified == 1);
  REQUIRE(b.fair.fairLock(key, kT3, 10s, 10s).acquired);
  CHECK(b.fair.fairUnlock(key, kT3).notified == 1);
  const Grant toT1 = heard(*grantsToT1);
  REQUIRE(toT1.kind == Grant::Kind::Granted);
  CHECK(toT1.fencingToken > toT2.fencingToken);
  const FairAcquireResult mine = b.fair.fairLock(key, kT1, 10s, 10s);
  CHECK(mine.acquired);
  CHECK(mine.fencingToken == toT1.fencingToken);
  CHECK(b.fair.fairUnlock(key, kT1).released);
}

// A fair key's await leaves no release record: the token's next hold is a hand-off to it, and
// when that hold is lost its release must say so, not answer from the await's release.
inline void aFairAwaitLeavesNoReleaseRecord(Backends& b, const std::string& key, const PassTime& passTime) {
  auto grants = b.fair.watchGrants(key, kT1);
  const FairAcquireResult held = b.fair.fairLock(key, kT1, 60s, 0ms);  // a record would outlive the claim
  REQUIRE(held.acquired);
  REQUIRE(b.conditions.await(key, kName, kT1, ConditionLock::Fair, held.fencingToken, 1s, 10s).awaiting);
  REQUIRE(b.fair.fairLock(key, kT2, 10s, 0ms).acquired);
  REQUIRE(b.conditions.signal(key, kName, kT2, ConditionLock::Fair).moved == 1);
  REQUIRE(b.fair.fairUnlock(key, kT2).notified == 1);
  REQUIRE(heard(*grants).lease == 1s);
  passTime(1100ms);  // the claim ends unrenewed: the hold is lost
  const ReleaseResult lost = b.fair.fairUnlock(key, kT1);
  CHECK_FALSE(lost.released);
  CHECK_FALSE(lost.releasedEarlier);
}

// A retried fair await that finds the key handed to its token since (signalled, then a release)
// releases nothing: the later fence tells that hold from the one the await gave up.
inline void aRetriedFairAwaitKeepsAHandOffToItsToken(Backends& b, const std::string& key) {
  auto grants = b.fair.watchGrants(key, kT1);
  const FairAcquireResult first = b.fair.fairLock(key, kT1, 10s, 0ms);
  REQUIRE(first.acquired);
  REQUIRE(b.conditions.await(key, kName, kT1, ConditionLock::Fair, first.fencingToken, 10s, 10s).awaiting);
  REQUIRE(b.fair.fairLock(key, kT2, 10s, 0ms).acquired);
  REQUIRE(b.conditions.signal(key, kName, kT2, ConditionLock::Fair).moved == 1);
  REQUIRE(b.fair.fairUnlock(key, kT2).notified == 1);
  const Grant handed = heard(*grants);
  REQUIRE(handed.kind == Grant::Kind::Granted);
  const AwaitResult retried = b.conditions.await(key, kName, kT1, ConditionLock::Fair, first.fencingToken, 10s, 10s);
  CHECK(retried.awaiting);
  CHECK(retried.awaitingEarlier);
  CHECK(retried.position == 0);  // signalled: go and claim the key
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  const FairAcquireResult claimed = b.fair.fairLock(key, kT1, 10s, 10s);
  REQUIRE(claimed.acquired);
  CHECK(claimed.fencingToken == handed.fencingToken);
  // A new await of that hold, with its own fence, is no retry: it releases and joins.
  const AwaitResult again = b.conditions.await(key, kName, kT1, ConditionLock::Fair, claimed.fencingToken, 10s, 10s);
  CHECK(again.awaiting);
  CHECK_FALSE(again.awaitingEarlier);
  CHECK(again.position == 1);
}

// signalAll moves every live waiter in the order they came: a fair key goes to each in turn, an
// exclusive key's waiters are each told.
inline void signalAllMovesEveryWaiterInOrder(Backends& b, const std::string& key) {
  const std::vector<std::string> waiters = {kT1, kT2, kT3};
  std::vector<std::unique_ptr<IGrantWatch>> grants;
  for (const auto& token : waiters) grants.push_back(b.fair.watchGrants(key, token));
  for (const auto& token : waiters) REQUIRE(holdFairThenAwait(b, key, token).position >= 1);
  REQUIRE(b.conditions.inspectCondition(key, kName).waiters.size() == 3);
  REQUIRE(b.fair.fairLock(key, kT4, 10s, 0ms).acquired);
  CHECK(b.conditions.signalAll(key, kName, kT4, ConditionLock::Fair).moved == 3);
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
  std::string holder = kT4;
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    CHECK(b.fair.fairUnlock(key, holder).notified == 1);
    REQUIRE(heard(*grants[i]).kind == Grant::Kind::Granted);
    REQUIRE(b.fair.fairLock(key, waiters[i], 10s, 10s).acquired);
    holder = waiters[i];
  }
  CHECK(b.fair.fairUnlock(key, holder).notified == 0);

  const std::string other = key + ":exclusive";
  std::vector<std::unique_ptr<IGrantWatch>> signals;
  for (const auto& token : waiters) signals.push_back(b.conditions.watchSignals(other, token));
  for (const auto& token : waiters) REQUIRE(holdThenAwait(b, other, token).awaiting);
  REQUIRE(b.locks.lock(other, kT4, 10s).acquired);
  CHECK(b.conditions.signalAll(other, kName, kT4, ConditionLock::Exclusive).moved == 3);
  for (auto& watch : signals) CHECK(heard(*watch).kind == Grant::Kind::Granted);
}

// A cancelled await leaves; leaving again, or after a signal, is nothing.
inline void aWaiterLeavesOnce(Backends& b, const std::string& key) {
  REQUIRE(holdThenAwait(b, key, kT1).awaiting);
  REQUIRE(holdThenAwait(b, key, kT2).awaiting);
  CHECK(b.conditions.leaveCondition(key, kName, kT1, 10s));
  CHECK_FALSE(b.conditions.leaveCondition(key, kName, kT1, 10s));
  CHECK_FALSE(b.conditions.renewAwait({key, kName, kT1, 10s}, 10s));
  REQUIRE(b.locks.lock(key, kT3, 10s).acquired);
  CHECK(b.conditions.signal(key, kName, kT3, ConditionLock::Exclusive).moved == 1);  // T2
  CHECK_FALSE(b.conditions.leaveCondition(key, kName, kT2, 10s));  // signalled already
  CHECK(b.conditions.inspectCondition(key, kName).waiters.empty());
}

// Renewals keep a place past its first lease, in one batch across conditions and keys; a place that
// ran out is not renewed.
inline void renewalsKeepAWaiterAndTheRecheckSeesItEnd(Backends& b, const std::string& key, const PassTime& passTime) {
  const std::string other = key + ":other";
  REQUIRE(holdThenAwait(b, key, kT1, 2s).awaiting);
  REQUIRE(holdThenAwait(b, other, kT2, 2s).awaiting);
  REQUIRE(holdThenAwait(b, key, kT3, 1s).awaiting);
  passTime(1100ms);
  const std::vector<ExtendResult> renewed =
      b.conditions.renewAwaitAll({{key, kName, kT1, 10s}, {other, kName, kT2, 10s}, {key, kName, kT3, 10s}}, 30s);
  REQUIRE(renewed.size() == 3);
  CHECK(renewed[0].extended);
  CHECK(renewed[1].extended);
  CHECK_FALSE(renewed[2].extended);  // its place ran out
  passTime(1000ms);  // past the first lease of T1 and T2
  const ConditionInfo info = b.conditions.inspectCondition(key, kName);
  REQUIRE(info.waiters.size() == 1);
  CHECK(info.waiters[0].token == kT1);
  CHECK(info.waiters[0].remaining > 20s);
  CHECK(b.conditions.inspectCondition(other, kName).waiters.size() == 1);
}

// Bad input is refused before anything is sent.
inline void badInputIsRefusedBeforeAnythingIsSent(Backends& b, const std::function<long long()>& calls) {
  const long long before = calls();
  const std::string oversized(kMaxConditionNameBytes + 1, 'n');
  auto& c = b.conditions;
  CHECK_THROWS_AS(c.await("k", "", kT1, ConditionLock::Exclusive, 1, 10s, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("k", oversized, kT1, ConditionLock::Exclusive, 1, 10s, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("k", kName, kT1, ConditionLock::Exclusive, 1, 0ms, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("k", kName, kT1, ConditionLock::Fair, 1, 10s, 0ms), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("k", kName, kT1, ConditionLock::Fair, 1, kMaxLeaseTime + 1ms, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("", kName, kT1, ConditionLock::Exclusive, 1, 10s, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("k", kName, "not a token", ConditionLock::Exclusive, 1, 10s, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.await("k", kName, kT1, ConditionLock::Fair, kMaxFencingToken + 1, 10s, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.signal("k", "", kT1, ConditionLock::Exclusive), InvalidArgumentError);
  CHECK_THROWS_AS(c.signalAll("k", oversized, kT1, ConditionLock::Fair), InvalidArgumentError);
  CHECK_THROWS_AS(c.renewAwait({"k", kName, kT1, 10s}, -1ms), InvalidArgumentError);
  CHECK_THROWS_AS(c.renewAwaitAll({{"k", "", kT1, 10s}}, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.leaveCondition("k", oversized, kT1, 10s), InvalidArgumentError);
  CHECK_THROWS_AS(c.inspectCondition("k", ""), InvalidArgumentError);
  CHECK_THROWS_AS(c.watchSignals("", kT1), InvalidArgumentError);
  CHECK(calls() == before);
  const std::string longest(kMaxConditionNameBytes, '\xff');  // any bytes, up to the limit
  CHECK(c.inspectCondition("k", longest).waiters.empty());
}

}  // namespace dlock::test::cond

#define DLOCK_CONDITION_CASES(Fixture, where)                                                                     \
  TEST_CASE_FIXTURE(Fixture, "await releases the key and joins in one step: a signal at once finds it" where) {  \
    ::dlock::test::cond::awaitReleasesAndJoinsAtOnce(backends, "joins");                                        \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a retried await whose first try ran joins once" where) {                          \
    ::dlock::test::cond::aRetriedAwaitJoinsOnce(backends, "retried");                                           \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "an await without the key is refused and joins nothing" where) {                   \
    ::dlock::test::cond::anAwaitWithoutTheKeyIsRefused(backends, "refused");                                    \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a signal by anyone but the key's holder is not the owner's, and moves nobody" where) { \
    ::dlock::test::cond::aSignalWithoutTheKeyIsNotTheOwners(backends, "owner");                                 \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a signal skips a waiter whose lease ended" where) {                               \
    ::dlock::test::cond::aSignalSkipsAWaiterWhoseLeaseEnded(backends, "dead", passTime);                        \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a signal before any await is not remembered" where) {                             \
    ::dlock::test::cond::aSignalBeforeAnyAwaitIsNotRemembered(backends, "early");                               \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a signal moves the longest waiter behind the fair queue, a release hands it the key" where) { \
    ::dlock::test::cond::aSignalMovesTheLongestWaiterIntoTheFairQueue(backends, "fair");                        \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a fair key's await leaves no release record for the token's next hold" where) {   \
    ::dlock::test::cond::aFairAwaitLeavesNoReleaseRecord(backends, "record", passTime);                         \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a retried fair await keeps a hand-off its token got since, and joins nothing" where) { \
    ::dlock::test::cond::aRetriedFairAwaitKeepsAHandOffToItsToken(backends, "handed");                          \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "signalAll moves every waiter in the order they came" where) {                     \
    ::dlock::test::cond::signalAllMovesEveryWaiterInOrder(backends, "all");                                     \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "a waiter leaves once, after a signal there is nothing to leave" where) {          \
    ::dlock::test::cond::aWaiterLeavesOnce(backends, "leave");                                                  \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "renewals keep a waiter in one batch, and a place that ran out is not renewed" where) { \
    ::dlock::test::cond::renewalsKeepAWaiterAndTheRecheckSeesItEnd(backends, "renew", passTime);                \
  }                                                                                                              \
  TEST_CASE_FIXTURE(Fixture, "bad input is refused before anything is sent" where) {                            \
    ::dlock::test::cond::badInputIsRefusedBeforeAnythingIsSent(backends, calls);                                \
  }
