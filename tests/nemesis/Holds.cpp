// SPDX-License-Identifier: Apache-2.0
#include "Holds.h"

namespace dlock::nemesis {

std::map<std::string, std::vector<Op>> byProcess(const std::vector<Op>& history) {
  std::map<std::string, std::vector<Op>> processes;
  for (const Op& op : history) processes[op.process].push_back(op);
  return processes;
}

std::vector<Hold> extractHolds(const std::vector<Op>& history) {
  std::vector<Hold> holds;
  for (const auto& [process, ops] : byProcess(history)) {
    if (ops.empty()) continue;
    const std::int64_t lastNs = ops.back().timeNs;
    const std::size_t first = holds.size();
    std::optional<std::int64_t> acquireInvoke;
    constexpr std::size_t kNone = static_cast<std::size_t>(-1);
    std::size_t open = kNone;  // the hold not yet released, an index into holds
    for (const Op& op : ops) {
      if (op.op == "acquire") {
        if (op.kind == Kind::Invoke) {
          acquireInvoke = op.timeNs;
        } else if (op.kind == Kind::Ok) {
          Hold hold;
          hold.process = process;
          hold.key = op.key;
          hold.token = op.token;
          hold.ownerToken = op.value;
          hold.acquireInvokeNs = acquireInvoke.value_or(op.timeNs);
          hold.acquireOkNs = op.timeNs;
          open = holds.size();
          holds.push_back(std::move(hold));
        }
      } else if (op.op == "fenced-write" && op.kind == Kind::Ok && open != kNone && holds[open].token == op.token) {
        holds[open].fencedWriteEndNs = op.timeNs;
        holds[open].fencedWriteOutcome = op.value;
      } else if (op.op == "release" && open != kNone && holds[open].key == op.key && holds[open].token == op.token) {
        Hold& hold = holds[open];
        if (op.kind == Kind::Invoke) {
          hold.releaseInvokeNs = op.timeNs;
        } else {
          hold.releaseEndNs = op.timeNs;
          hold.releaseOutcome = op.kind == Kind::Ok ? "ok" : op.errorType;
          if (op.errorType == "LockLostError" && !hold.told) {
            hold.told = true;
            hold.toldNs = op.timeNs;
          }
          open = kNone;
        }
      }
    }
    // Lost notices come from the watchdog's thread, at any point, and `invalid` from the holder's
    // own check during its hold: match them by key and token.
    for (const Op& op : ops) {
      if (op.op != "lost" && op.op != "invalid") continue;
      for (std::size_t i = first; i < holds.size(); ++i) {
        Hold& hold = holds[i];
        if (hold.key != op.key || hold.token != op.token || op.timeNs < hold.acquireOkNs) continue;
        if (!hold.toldNs || op.timeNs < *hold.toldNs) {
          hold.told = true;
          hold.toldNs = op.timeNs;
        }
        if (!hold.noticedNs || op.timeNs < *hold.noticedNs) hold.noticedNs = op.timeNs;
      }
    }
    for (std::size_t i = first; i < holds.size(); ++i) {
      Hold& hold = holds[i];
      hold.sectionEndNs = hold.releaseInvokeNs.value_or(lastNs);
      hold.endNs = hold.releaseEndNs.value_or(lastNs);
    }
  }
  return holds;
}

}  // namespace dlock::nemesis
