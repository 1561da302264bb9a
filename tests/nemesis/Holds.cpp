// SPDX-License-Identifier: Apache-2.0
#include "Holds.h"

#include <algorithm>

namespace dlock::nemesis {

std::optional<std::int64_t> Hold::coveringSend(std::int64_t atNs) const {
  std::optional<std::int64_t> send;
  std::int64_t end = 0;
  for (const auto& [sent, until] : evidence) {
    if (sent > atNs) break;
    if (until > atNs && until > end) {
      end = until;
      send = sent;
    }
  }
  return send;
}

std::optional<std::int64_t> Hold::validUntil(std::int64_t atNs) const {
  std::optional<std::int64_t> end;
  for (const auto& [sent, until] : evidence) {
    if (sent > atNs) break;
    if (until > atNs && (!end || until > *end)) end = until;
  }
  return end;
}

bool Hold::validAt(std::int64_t atNs) const { return validUntil(atNs).has_value(); }

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
      } else if ((op.op == "held" || op.op == "invalid") && open != kNone && holds[open].key == op.key &&
                 holds[open].token == op.token && !op.value.empty() && op.value != "0") {
        holds[open].vouchedNs.push_back(std::stoll(op.value));  // the last look that found it held
      } else if (op.op == "write" && open != kNone && holds[open].token == op.token) {
        auto& writes = holds[open].writes;
        if (op.kind == Kind::Invoke) {
          holds[open].vouchedNs.push_back(op.timeNs);
          writes.emplace_back(op.timeNs, op.timeNs);
        } else if (op.kind == Kind::Ok && !writes.empty()) {
          writes.back().second = op.timeNs;
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
    // The lease evidence is written when the backend answered (before the acquire's completion,
    // or from the watchdog's thread): match it by key and owner token.
    std::map<std::pair<std::string, std::string>, std::size_t> byOwner;
    for (std::size_t i = first; i < holds.size(); ++i) byOwner.emplace(std::make_pair(holds[i].key, holds[i].ownerToken), i);
    for (const Op& op : ops) {
      if (op.op != "lease") continue;
      const auto found = byOwner.find({op.key, op.message});
      if (found == byOwner.end()) continue;
      const std::int64_t validMs = std::stoll(op.value);
      holds[found->second].evidence.emplace_back(op.timeNs, op.timeNs + validMs * 1'000'000);
    }
    for (std::size_t i = first; i < holds.size(); ++i) std::sort(holds[i].evidence.begin(), holds[i].evidence.end());
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
