// SPDX-License-Identifier: Apache-2.0
// ConditionChecks.h — the checks of a bounded-buffer run (CheckerInput::primitive "cond",
// Client.cpp, ConditionRecorder.h), from the store's record and the lease evidence, never a client's verdict:
//
//   2  buffer          per key, from the store's lists: no item taken twice, none taken that was
//                      never put, every item put either taken or still in the buffer, and the
//                      buffer never longer than the capacity after an accepted put (its peak)
//   7  held when acting  every fenced put or take (dated from the look that allowed it) inside
//                      the writer's evidence (its `lease` records: confirmed send + validity) sent
//                      since it last gave the key up (its acquire or await was invoked), and its
//                      token in the store's list of accepted tokens: a refusal means a later
//                      holder had written first, so the writer acted without the key (after an
//                      await that returned without it, or a lost hold)
//   8  signal by the owner  no signal answered as the owner's (an ok `signal`) after another
//                      process took the key: an acquisition of it (`taken`: sent after the
//                      signaller's own acquisition's reply, answered before the signal was invoked)
//   10 no lost signal  the first signal answered as the owner's of a condition after a waiter's
//                      await was invoked, by another process, must move every such waiter that
//                      joined (`joined`): on the server it ran after that await's script, which
//                      released the key. Not judged: a waiter whose place lapsed (`woken ...
//                      lapsed`), one a fault aimed at during that time, one that left or was woken
//                      (`woken`) before the signal completed unless it was signalled
//   11 not judged (the lock keys are the exclusive lock's, judged by the lock runs)
// Plain functions over values; thread-compatible.
#pragma once

#include <string>

#include "Checker.h"

namespace dlock::nemesis {

// Fills checks 2, 7, 8, 10 and 11 of `report` for a bounded-buffer run.
void checkConditionRun(const CheckerInput& input, Report& report);

}  // namespace dlock::nemesis
