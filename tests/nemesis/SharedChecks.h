// SPDX-License-Identifier: Apache-2.0
// SharedChecks.h — the checks of a read-write lock or semaphore run (CheckerInput::primitive "rw"
// or "sem"), where holds may share a key: readers with readers, permit holders up to the capacity.
//
// Sections (checks 7 and 8) are replayed from the fenced store's act log (FencedStore.h): each
// holder records `enter` before it acts and `exit` after, in one script with the permit tally, so
// the store's order says which sections were open at once. A section B entering while A is open
// conflicts when A or B is a writer (rw), or when the permits open exceed the capacity (sem). A
// conflict is an overlap when the evidence (Holds.h: confirmed sends + validity) shows every hold
// in it valid when B's enter completed — on a correct lock none can be, since each grant
// came after the others' server leases ended, and the evidence never outlasts a server lease —
// and a loss of the invalid ones otherwise (told in time, or not: check 7). B entering after its
// own evidence ran out, or a reader reading a register token above its fence while its evidence
// was valid (a writer granted inside its read hold), is a violation too.
//
// Order (check 10):
//   rw   writer preference: a read taken by an attempt sent after a writer's attempt had queued
//        (completed) and completed while that writer still waited (no later outcome of it, and
//        within its waiter lease, which is the hold's lease here) is a reader admitted past a
//        waiting writer.
//   sem  hand-offs: a waiter the releases should have admitted but that admitted itself: an
//        acquisition whose attempts queued and which was then taken by its own attempt (validity
//        0: admitted in that very call; a hold it found already its own, a grant, answers what
//        is left, the whole lease when the grant fell in the same server millisecond), with no lapse of
//        the key that may have come in the two leases before (a hold whose evidence ran out before
//        its release was sent, a place whose owner stopped attempting or could not leave, permits
//        an attempt whose reply was lost may have taken: what a call reclaims). On the library only
//        a reclaim in the waiter's own call does that (every release, leave and reclaim admits the
//        head waiters that fit); a release that admits one where more fit leaves the rest to
//        their own next attempt. Likewise every sample of the server's queue that found a head
//        waiter whose permits fit (StrandWatch.h, single server) with no such lapse to explain it.
//        Each of the two counts as a violation.
// Plain functions over values; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "Checker.h"
#include "Holds.h"

namespace dlock::nemesis {

struct SharedSections {
  long long entersReplayed = 0;  // enters of a known hold, in the act log
  long long overlaps = 0;        // conflicts with every hold in them valid
  long long enteredPastEvidence = 0;
  long long readsPastFence = 0;
  long long peakPermits = 0;     // the most permits (or readers) valid and open at once
  std::string first;             // the first violation's story
  long long lostTold = 0;
  long long lostUntold = 0;
  long long lostHolderKilled = 0;
  std::string firstUntold;
  [[nodiscard]] long long violations() const { return overlaps + enteredPastEvidence + readsPastFence; }
};

struct SharedOrder {
  long long judged = 0;      // rw: reads taken at once; sem: acquisitions that queued
  long long samples = 0;     // sem: the server's queue seen with a fitting head (StrandWatch.h)
  long long violations = 0;  // rw: past a waiting writer; sem: self-admitted, no lapse to explain it
  bool failed = false;
  std::string first;
};

[[nodiscard]] SharedSections replaySections(const CheckerInput& input, const std::vector<Hold>& holds);
[[nodiscard]] SharedOrder checkSharedOrder(const CheckerInput& input, const std::vector<Hold>& holds);

}  // namespace dlock::nemesis
