// SPDX-License-Identifier: Apache-2.0
// ElectionChecks.h — the checks of a leader-election run (CheckerInput::primitive "elect",
// Client.cpp's ElectionWorkload), from the clients' records of what the public classes told them:
//
//   8  one leader      no two clients' local terms overlap: a term runs from the moment its
//                      campaign returned (`term`) to the last local deadline its holder read
//                      while it led (`term`, `term-valid`: validUntil()), or to its resign's
//                      invoke if earlier (a resign in doubt counts as not held: the holder acts
//                      no more); a campaign that returned a term whose deadline had passed fails
//   10 observers       per watch (one observe() call): its reports never go back a term; each
//                      leader it reports was a real term (a hold some client's backend confirmed:
//                      `lease` evidence, or a campaign that returned it) with a value that term
//                      proclaimed; between two leader reports, every term a campaign returned in
//                      between is counted in the later reports' skipped terms (no silent gap);
//                      and a leader's watch of its own term (started as the term began, which
//                      lasts until that watch's first report or kOwnWatchBound) reports the term
//                      before its resign, unless it ended for its holder first or the watch
//                      was stopped sooner (the read after subscribe)
//   2, 7, 11 left out (no unfenced counter; a lost term's notice is judged through check 8's
//                      deadlines; the server's record holds no election key)
// Check 1 (the fenced store takes only rising terms, FencedStore::writeTerm) and checks 3-6, 9 are
// the lock runs' own (Checker.cpp), over the campaigns recorded as acquisitions.
// Plain functions over values; thread-compatible.
#pragma once

#include <chrono>

#include "Checker.h"

namespace dlock::nemesis {

// How long a leader waits for its own watch's first report before its term may end (Client.cpp):
// the report is one read away; the bound only ends the wait of a watch that never reads. A watch
// stopped sooner without a report (the run ended, the nemesis ended the hold) is not judged.
inline constexpr std::chrono::milliseconds kOwnWatchBound{3000};

// Fills checks 2, 7, 8, 10 and 11 of `report` for an election run.
void checkElectionRun(const CheckerInput& input, Report& report);

}  // namespace dlock::nemesis
