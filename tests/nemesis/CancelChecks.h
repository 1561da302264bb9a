// SPDX-License-Identifier: Apache-2.0
// CancelChecks.h — check 12: a cancelled acquire ends at once, whatever the server or the link
// does. `requestCancel()` must end the wait within a few milliseconds plus the scheduler's
// latency: the call in flight is cut off, and what must follow (the leave, the give-back of a
// grant that raced the cancel) runs off the caller's thread.
//
// Judged from each client's own records: a `cancel` (value "acquire") recorded inside an acquire
// of the same key, just before the client called requestCancel(), and that acquire's completion.
// Fails when the completion came later than `bound` after the cancel, unless the nemesis had the
// process SIGSTOPped in between (its threads stood still). A cancel whose acquire never completed
// (the process was killed) is not judged. A Condition await's cancel is not judged here: it ends
// only once the key is held again, as `Condition.h` documents.
// Plain functions over values; thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "FaultHits.h"
#include "History.h"

namespace dlock::nemesis {

struct CancelsResult {
  long long judged = 0;   // cancelled acquires that ended
  long long excused = 0;  // ... with their process paused by the nemesis in between
  long long slow = 0;     // ... not excused, and ended later than the bound after their cancel
  double maxMs = 0;       // the longest from a cancel to its acquire's end, excused ones left out
  std::string first;      // the first slow one, described
};

// The bound: measured on the unmodified library over the short profile (tests/nemesis/README.md).
inline constexpr std::chrono::milliseconds kCancelBound{100};

[[nodiscard]] CancelsResult checkCancels(const std::vector<Op>& history, const std::vector<FaultWindow>& windows,
                                         std::chrono::milliseconds bound = kCancelBound);

}  // namespace dlock::nemesis
