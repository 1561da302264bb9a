// SPDX-License-Identifier: Apache-2.0
// Checker.h — turns a fault-testing run into a Report: its histories, the fenced store's final
// state, the lock servers' keys without a TTL (sampled during and after the run) and each client's
// exit. The twelve checks:
//
//   1 fenced store     accepted tokens strictly increase per key; the count matches the list; every
//                      write a client calls accepted is in the store's list
//   2 unfenced updates per key, completed unfenced SETs minus the final counter: a loss fails beyond
//                      the writes that landed inside what a fault with the scenario's named cause
//                      excused on that key (from check 8's excused overlap to the end of the
//                      overlapped hold; a paused process's late write from its invoke to its
//                      landing); a surplus fails beyond the writes in doubt
//   3 fencing tokens   A ok before B invoked, same key: token(A) < token(B)
//   4 recovery         after each fault-end, each live client acquires within the bound; a client
//                      whose history ends before the bound could not be observed: fails too
//   5 errors, exits    every error typed; no crash (non-zero exit the nemesis did not cause), no hang
//   6 TTLs             no dlock key without a TTL but the fence counters
//   7 lost leases      a hold lost inside its section (another process acquired its key, or the
//                      store refused its fenced write) was told to its holder before its release
//                      returned; a release that returned ok afterwards is an untold loss whatever
//                      came later, one that failed otherwise is told only by a notice within a
//                      lease. A nemesis kill excuses the holder only if it came first.
//   8 exclusion        judged from evidence, not notices: a hold is valid only while its last
//                      acquisition or renewal the backend confirmed, counted from when it was SENT,
//                      has validity left (Hold::evidence, LeaseRecorder.h). Fails when the lock
//                      vouched for a lease (a look that found it held, a write) outside that, or
//                      another process took the key while it was valid, unless a fault with the
//                      scenario's named cause covers that overlap: a fault on the servers that
//                      started by then, after which the evidence valid then was not renewed.
//                      Every acquisition by another owner inside the hold is judged
//   9 faults hit       every fault recorded with whether it hit its holder (its evidence valid as
//                      it struck) or waiter as the scenario means (FaultHits.h), and every cycle
//                      whose fault never struck (`fault-miss`); fails unless `cycles` faults hit
//                      as meant
//  10 fair order       a fair lock's grants in queue order, none to a waiter that left
//                      (FairOrder.h); left out of the verdict of the default lock's runs
//  11 deletes, overwrites  in the server's record, no lock key deleted, set for another owner or
//                      extended while its holder's lease lived, except by a command carrying the
//                      holder's token, no write by a call the server ran after the deadline it
//                      carried (LateWrites.h), and no orphan grant (a SET for an owner no client
//                      acquired for) kept past the lease it was granted with (ServerWrites.h); vacuous
//                      where a record was due and judged nothing; left out of the verdict of the
//                      read-write and semaphore runs (their keys are not in the record)
//  12 cancels answered a cancelled acquire ended within kCancelBound of its cancel, its process
//                      not paused by the nemesis in between (CancelChecks.h); left out of the
//                      verdict of a run where no acquire was cancelled
//
// A check that cannot fail in a run is left out of its verdict (CheckResult::judged false), its
// reason and the summary's verdict line saying so.
//
// Evidence of a loss comes from outside the holder: the other process's acquisition, on one
// server the server's own record of the lock key set for another owner inside the section
// (process `server`, ServerObserver.h; `serverSetsShowLosses`), and the store's own list of accepted tokens (a completed fenced
// write whose token is not in it was refused because a later holder had written).
//
// Plain functions over values; thread-compatible.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "FaultHits.h"
#include "FencedStore.h"
#include "History.h"

namespace dlock::nemesis {

// The exit code a client uses when one operation outran its hang bound.
inline constexpr int kHangExitCode = 3;

struct ClientExit {
  std::string process;               // "c3"
  int exitCode = 0;                  // when it exited
  int signal = 0;                    // the signal that ended it; 0 when it exited
  bool killedByNemesis = false;      // a kill fault: its death is part of the schedule
  bool killedAtDeadline = false;     // still running at the run's deadline and killed: a hang
  std::optional<std::int64_t> killedNs;  // CLOCK_MONOTONIC of the nemesis's kill, when known
};

struct RunInfo {
  std::string topology;
  std::string scenario;
  std::uint64_t seed = 0;
};

struct CheckerInput {
  RunInfo run;
  std::vector<Op> history;  // every process's records, the nemesis's included
  std::map<std::string, StoreKeySnapshot> store;
  std::vector<std::string> keysWithoutTtl;  // found on the lock servers
  std::string keyPrefix = "dlock:";
  std::vector<ClientExit> exits;  // one per client process
  std::chrono::milliseconds recoveryBound{10'000};
  // Why sections may overlap in this scenario (lost writes, a failover without acknowledgement,
  // a clock jump, a paused process); empty when the lock must keep them apart (checks 2 and 8).
  std::string overlapCause;
  // Why fencing tokens go back here (data lost together with a clock stepped back: the one case
  // README, "Fencing tokens", names); empty where they must keep rising (check 3). A scenario
  // that names it means them to go back, and a run where none did shows nothing: check 3 fails.
  std::string fenceRegressionCause;
  FaultExpectation faults;
  int cycles = 1;  // faults that must hit as meant (the runner's --cycles)
  // The clients ran a fair lock (LockBuilder::fair): check 10 replays its queue from the servers'
  // record (`serverRecord`: ServerObserver.h on every data node), node by node.
  bool fair = false;
  bool serverRecord = true;
  bool serverSetsShowLosses = true;  // one server: its record's SET for another owner is a loss
  // What the clients ran: "lock" (ILock), "rw" (read-write holds), "sem" (permits of `capacity`)
  // or "cond" (the bounded buffer, ConditionChecks.h) or "elect" (leader election, ElectionChecks.h),
  // the last two with the hold's lease `lease` as their waiter lease (SharedChecks.h).
  std::string primitive = "lock";
  std::uint32_t capacity = 1;
  std::chrono::milliseconds lease{1000};
  // A semaphore run: the permits each lock server counted in use once every lease had ended after
  // the run, by key (-1: could not be read). Check 6 wants 0 everywhere.
  std::map<std::string, long long> permitsInUseAfter;
  // A condition run ("cond", ConditionChecks.h; `capacity` is the buffer's): the live waiters each
  // condition still had once every waiter lease had ended after the run, by "key/name" (-1: could
  // not be read). Check 6 wants 0 everywhere.
  std::map<std::string, long long> conditionWaitersAfter;
  // A condition run that need not judge a signal (Scenario::signalsOptional): check 10 left out
  // when no await met one.
  bool signalsOptional = false;
};

struct CheckResult {
  std::string name;
  bool passed = true;
  // False for a check that could not fail in this run (nothing of its kind ran): out of the
  // verdict, its reason saying why ("not judged: ..."), never a pass.
  bool judged = true;
  std::string reason;
};

struct Report {
  RunInfo run;

  long long acquisitionsOk = 0;
  long long acquireTimeouts = 0;
  long long acquireFailures = 0;
  long long fencedAccepted = 0;
  long long fencedRejected = 0;
  long long unfencedLostUpdates = 0;  // keys short of their completed writes, summed
  long long unfencedSurplus = 0;      // keys above them (writes whose error hid a landing), summed
  std::map<std::string, long long> unfencedLostByKey;
  long long fenceRegressions = 0;
  long long fencedStoreViolations = 0;
  long long lostTold = 0;
  long long lostUntold = 0;
  long long lostHolderKilled = 0;  // lost after the nemesis killed the holder: nobody to tell
  long long lostExpiredFirst = 0;  // the holder knew its lease had ended before the other acquired
  long long overlapsWhileValid = 0;   // lost while the evidence showed the holder's lease valid
  long long overlapsExcused = 0;      // ... inside a fault with the scenario's named cause
  long long vouchedPastEvidence = 0;  // the lock vouched for a lease the evidence no longer covered
  long long exclusionViolations = 0;  // overlaps not excused, and vouching past the evidence
  long long storeRefusedHolds = 0;    // holds whose fenced write the store refused
  long long serverSets = 0;           // lock-key SETs in the server's own record (ServerObserver.h)
  long long lossesSeenByServer = 0;   // losses whose first evidence was that record
  long long faults = 0;
  long long faultsOnHolders = 0;      // faults that hit a holder as the scenario means
  long long faultsKeyTaken = 0;       // ... and the held key was taken during the hold
  long long faultMisses = 0;          // faults that missed, and cycles whose fault never struck
  std::vector<double> recoveryMs;  // one per (fault-end, live client) that recovered
  double recoveryP50Ms = 0;
  double recoveryMaxMs = 0;
  long long recoveryViolations = 0;
  long long recoveryUnobserved = 0;   // the client's history ended before the bound elapsed
  long long recoveryInterrupted = 0;  // the next fault started before the bound elapsed
  std::map<std::string, long long> errorsByType;
  long long crashes = 0;
  long long hangs = 0;
  long long keysWithoutTtl = 0;  // not fence counters

  long long fairGrants = 0;           // grants replayed by check 10
  long long fairViolations = 0;       // ... out of queue order, or to a waiter that left
  long long serverWritesJudged = 0;   // DELs and SETs check 11 judged
  long long serverWriteViolations = 0;  // ... that deleted, overwrote or extended another holder's live key
  long long orphanGrants = 0;           // lock-key SETs for an owner no client's acquisition named
  long long orphanGrantViolations = 0;  // ... kept past the lease they were granted with
  double orphanGrantMaxMs = 0;          // the longest one was kept
  long long sharedEnters = 0;         // rw, sem: enters replayed from the store's act log
  long long sharedPeak = 0;           // ... the most permits (or readers) valid inside at once
  long long orderJudged = 0;          // rw: reads taken at once; sem: acquisitions that queued
  long long orderViolations = 0;      // rw: reads past a waiting writer; sem: self-admitted waiters

  long long cancelsJudged = 0;        // cancelled acquires that ended (check 12)
  long long cancelsSlow = 0;          // ... later than the bound after their cancel
  double cancelMaxMs = 0;             // the longest from a cancel to its acquire's end

  std::array<CheckResult, 12> checks;

  // True when any check failed.
  [[nodiscard]] bool failed() const;
  // Which checks failed, by number; "" when none.
  [[nodiscard]] std::string failedChecks() const;
  [[nodiscard]] std::string summary() const;
  [[nodiscard]] static std::string markdownHeader();
  [[nodiscard]] std::string markdownRow() const;
  [[nodiscard]] std::string json() const;
};

// True when `redisKey` is the fence counter of some key under `prefix`, as KeyNames names it on
// one server (`<prefix>{<key>}:fence`) or on a cluster (`<prefix>#{<h>}:fence:<key>`): the one
// dlock key that has no TTL by design.
[[nodiscard]] bool isFenceCounter(std::string_view redisKey, std::string_view prefix);

// The error types a client may record: dlock's LockError family and StoreError.
[[nodiscard]] bool isTypedError(std::string_view errorType);

[[nodiscard]] Report check(const CheckerInput& input);

}  // namespace dlock::nemesis
