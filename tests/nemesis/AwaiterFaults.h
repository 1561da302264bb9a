// SPDX-License-Identifier: Apache-2.0
// AwaiterFaults.h — faults on a condition's AWAITER around a signal, for the bounded buffer
// (Client.cpp --primitive cond). A consumer W awaiting the first key's notEmpty (its history
// inside the await, the server listing its token on the condition: inspectCondition) is paused or
// cut off from the servers (2.5 s, past its 2 s waiter lease), or killed; a producer P is asked
// for the key with a fixed 1 s lease and holds it 1.6 s, and a producer C for the key as soon as
// P holds: C takes it once P's lease ended, puts and signals (while W is away), and P's signal at
// the end of its hold comes after C took the key (the library must refuse it: NotOwnerError). W,
// back, must re-acquire before it acts. The fault's target is W ("(waiter)": FaultHits.h counts
// it hit when W was inside the await).
#pragma once

#include "Scenario.h"
#include "WaiterFaults.h"

namespace dlock::nemesis {

void awaiterAroundSignal(Run& run, WaiterFault fault);

// awaiterAroundSignal with a pause, a partition or a kill per cycle, drawn from the seed.
void awaiterMixed(Run& run);

// An await sent into a paused server (single server): a producer holds the first key (the
// watchdog's lease) until the server is SIGSTOPped, then awaits notFull at once, for a third of
// the acquire timeout (Client.cpp's kRoleAwaitOnRelease). The call gives up while the server is
// paused; the server runs the await script when it resumes 2.5 s later, releasing the key for the
// others. The holder must not put into the buffer after that (ConditionChecks' check 7): the
// library reports the hold lost when the await's answer never came (Condition.h).
void awaitInServerPause(Run& run);

}  // namespace dlock::nemesis
