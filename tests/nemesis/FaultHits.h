// SPDX-License-Identifier: Apache-2.0
// FaultHits.h — whether each fault of a run did what it was for: it found a client inside its
// critical section (the target the nemesis recorded), the hold outlived the fault when the
// scenario needs its release to cross the recovery, and the key was, or was not, taken by
// another client while that hold was open. The runner retries a cycle whose fault missed; the
// checker fails a run where no fault hit (check 9: a vacuous run proves nothing).
//
// A fault aimed at a waiter (WaiterFaults.h) hits when its target was waiting for the key; one
// aimed at a canceller, when its target's wait also ended on a cancel inside the fault.
// The nemesis records each targeted fault as fault-start/fault-end with key = the target process
// and message = the lock key it holds (History.h). Plain functions over values; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

// What a scenario's fault means to do to a holder.
struct FaultExpectation {
  enum class Taken { either, yes, no };
  bool holderHit = true;         // false: the fault does not aim at a holder (counted, never required)
  bool outlivesFault = false;    // the hold must still be open when the fault ends
  Taken taken = Taken::either;   // the held key taken by another client while the hold was open
};

struct FaultWindow {
  std::string name;
  std::string target;     // the process the fault aimed at, or ""
  std::string targetKey;  // the lock key that process held, or ""
  std::int64_t startNs = 0;
  std::optional<std::int64_t> endNs;
};

struct FaultHit {
  FaultWindow window;
  bool waiterHit = false;   // a fault on a waiter (aimsAtWaiter): the target was waiting for targetKey
  bool holderHit = false;   // the target held targetKey when the fault started
  bool outlived = false;    // ... and still when it ended
  bool taken = false;       // another process acquired targetKey while that hold was open
  bool asExpected = false;  // all that the expectation asks
  std::string takenBy;      // "c4 token 1234", when taken
};

[[nodiscard]] std::vector<FaultWindow> faultWindows(const std::vector<Op>& history);

// A fault aimed at a waiter ("(waiter)" in its name, WaiterFaults.h): it hits when its target was
// inside an acquire of the key, and means nothing else.
[[nodiscard]] bool aimsAtWaiter(const FaultWindow& window);

// A fault aimed at a canceller ("(canceller)", WaiterFaults.h): it hits when its target was
// inside an acquire of the key at its start, and that acquire ended on a cancel inside it.
[[nodiscard]] bool aimsAtCanceller(const FaultWindow& window);

// One entry per fault window, in start order.
[[nodiscard]] std::vector<FaultHit> assessFaults(const std::vector<Op>& history, const FaultExpectation& expectation);

}  // namespace dlock::nemesis
