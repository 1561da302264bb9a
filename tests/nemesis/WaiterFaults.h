// SPDX-License-Identifier: Apache-2.0
// WaiterFaults.h — faults on WAITERS around a hand-off, and a stale release near another's
// lease end (single server). A holder P is asked for a long hold of the first key; W and then C
// are asked for it too, and wait (the fair lock: both in its queue, W ahead; the default lock:
// both subscribed to its release message); W is paused, cut off or killed, and P releases: the
// key goes to W (fair: a claim no longer than W's place) or to the next waiter. C then holds it
// up to 3 s, and W comes back inside that hold: its acquire must not return while C holds the
// key. The fault's target is W (a name with "waiter": FaultHits.h counts it hit when W was
// waiting for the key when it started).
#pragma once

#include "Scenario.h"

namespace dlock::nemesis {

enum class WaiterFault { pause, partition, kill };

// Where the server shows the waiters: the default lock's release channel (its subscribers), the
// fair lock's queue, the read-write lock's or the semaphore's (their lengths).
enum class WaitQueue { releaseChannel, fair, readWrite, semaphore };

void waiterAroundHandOff(Run& run, WaiterFault fault, WaitQueue queue);

// One of pause, partition or kill per cycle, drawn from the seed.
void waiterMixed(Run& run, WaitQueue queue);

// A fault on a CANCELLER: P holds the first key, W waits for it with a cancel; W is cut off from
// the server, P releases, and 0-100 ms (drawn) after W's next try went into the cut the runner
// cancels W's acquire. The try in flight reaches the server only
// when the link heals, after W gave up: the server must refuse it (check 11's late writes), the
// cancel must not wait for it, and what W left (its registry entry or queue place, a grant that
// raced the cancel) is given back (check 10, check 11's orphan grants). The fault's name has
// "(canceller)": it hits when W was waiting at its start and its acquire ended on the cancel
// inside it (FaultHits.h).
void cancellerCutOff(Run& run, WaitQueue queue);

// A holder SIGSTOPped past its lease; another client takes the key with a fixed 1.5 s lease; the
// stale holder resumes and releases when about 250 ms of that lease are left: its release must
// leave the other's key alone.
void staleReleaseNearExpiry(Run& run, WaitQueue queue);

// Read-write lock: a writer P inside its hold of the first key, a writer W waiting for it (the
// server's queue shows W); P downgrades and is cut off from the server as the downgrade returns:
// W must not get the write while P's read lives (a writer admitted beside P's read section is
// judged, SharedChecks.h, check 8).
void downgradeBesideWaiter(Run& run);

}  // namespace dlock::nemesis
