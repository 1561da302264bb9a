// SPDX-License-Identifier: Apache-2.0
#include "FaultHits.h"

#include <algorithm>

#include "Holds.h"

namespace dlock::nemesis {
namespace {

constexpr const char* kNemesis = "nemesis";

// The target's hold of the key that was open when the fault started: acquired before, its
// release not yet invoked (a killed holder never invokes it), and its evidence valid then (a
// hold whose lease had run out met no held key).
const Hold* heldAtStart(const std::vector<Hold>& holds, const FaultWindow& window) {
  for (const Hold& hold : holds) {
    if (hold.process != window.target || hold.key != window.targetKey) continue;
    if (hold.acquireOkNs < window.startNs && hold.releaseInvokeNs.value_or(INT64_MAX) > window.startNs &&
        hold.validAt(window.startNs)) {
      return &hold;
    }
  }
  return nullptr;
}

// Whether the target was inside an acquire or a condition's await of the key (invoked, not
// completed) when the fault started: a fault aimed at a waiter.
bool waitingAtStart(const std::vector<Op>& history, const FaultWindow& window) {
  bool waiting = false;
  for (const Op& op : history) {
    if (op.process != window.target || (op.op != "acquire" && op.op != "await") || op.timeNs > window.startNs) continue;
    if (op.kind == Kind::Invoke) {
      waiting = op.key == window.targetKey;
    } else {
      waiting = false;
    }
  }
  return waiting;
}

// Whether the target's acquire of the key was cancelled inside the window and ended on that
// cancel before the window closed: its `cancel` record, then the acquire's completion, both inside.
bool cancelledInside(const std::vector<Op>& history, const FaultWindow& window) {
  const std::int64_t end = window.endNs.value_or(INT64_MAX);
  bool cancelled = false;
  for (const Op& op : history) {
    if (op.process != window.target || op.key != window.targetKey || op.timeNs < window.startNs || op.timeNs > end) {
      continue;
    }
    if (op.op == "cancel") cancelled = true;
    if (cancelled && op.op == "acquire" && op.kind != Kind::Invoke) return true;
  }
  return false;
}

}  // namespace

bool aimsAtWaiter(const FaultWindow& window) { return window.name.find("(waiter)") != std::string::npos; }

bool aimsAtCanceller(const FaultWindow& window) { return window.name.find("(canceller)") != std::string::npos; }

std::vector<FaultWindow> faultWindows(const std::vector<Op>& history) {
  std::vector<FaultWindow> windows;
  for (const Op& op : history) {
    if (op.process != kNemesis) continue;
    if (op.op == "fault-start") {
      windows.push_back({op.value, op.key, op.message, op.timeNs, std::nullopt});
    } else if (op.op == "fault-end") {
      // The latest open window of that name and target.
      for (auto it = windows.rbegin(); it != windows.rend(); ++it) {
        if (!it->endNs && it->name == op.value && it->target == op.key) {
          it->endNs = op.timeNs;
          break;
        }
      }
    }
  }
  return windows;
}

std::vector<FaultHit> assessFaults(const std::vector<Op>& history, const FaultExpectation& expectation) {
  const std::vector<Hold> holds = extractHolds(history);
  std::vector<FaultHit> hits;
  for (const FaultWindow& window : faultWindows(history)) {
    FaultHit hit;
    hit.window = window;
    if (aimsAtCanceller(window)) {
      hit.waiterHit = !window.target.empty() && waitingAtStart(history, window) && cancelledInside(history, window);
      hit.asExpected = hit.waiterHit;
      hits.push_back(std::move(hit));
      continue;
    }
    if (aimsAtWaiter(window)) {
      hit.waiterHit = !window.target.empty() && waitingAtStart(history, window);
      hit.asExpected = hit.waiterHit;
      hits.push_back(std::move(hit));
      continue;
    }
    const Hold* hold = window.target.empty() ? nullptr : heldAtStart(holds, window);
    if (hold != nullptr) {
      hit.holderHit = true;
      const std::int64_t end = window.endNs.value_or(window.startNs);
      // A hold ended by a kill has no release: it outlives nothing.
      hit.outlived = hold->releaseInvokeNs.has_value() && *hold->releaseInvokeNs > end;
      const std::int64_t until = hold->releaseInvokeNs.value_or(INT64_MAX);
      for (const Hold& other : holds) {
        if (other.key == hold->key && other.process != hold->process && other.acquireOkNs > window.startNs &&
            other.acquireOkNs < until) {
          hit.taken = true;
          hit.takenBy = other.process + " token " + std::to_string(other.token);
          break;
        }
      }
    }
    using Taken = FaultExpectation::Taken;
    hit.asExpected = hit.holderHit && (!expectation.outlivesFault || hit.outlived) &&
                     (expectation.taken == Taken::either || (expectation.taken == Taken::yes) == hit.taken);
    hits.push_back(std::move(hit));
  }
  return hits;
}

}  // namespace dlock::nemesis
