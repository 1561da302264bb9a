// SPDX-License-Identifier: Apache-2.0
#include "CancelChecks.h"

#include <algorithm>
#include <map>
#include <optional>

namespace dlock::nemesis {
namespace {

// Whether the nemesis had `process` SIGSTOPped at some moment of [fromNs, toNs].
bool pausedBetween(const std::vector<FaultWindow>& windows, const std::string& process, std::int64_t fromNs,
                   std::int64_t toNs) {
  return std::any_of(windows.begin(), windows.end(), [&](const FaultWindow& window) {
    const std::string prefix = "SIGSTOP " + process;
    const bool named = window.name.rfind(prefix, 0) == 0 &&
                       (window.name.size() == prefix.size() || window.name[prefix.size()] == ' ');
    return named && window.startNs <= toNs && window.endNs.value_or(INT64_MAX) >= fromNs;
  });
}

// One process's acquire under way: its key, and its first cancel.
struct OpenAcquire {
  std::string key;
  std::optional<std::int64_t> cancelNs;
};

}  // namespace

CancelsResult checkCancels(const std::vector<Op>& history, const std::vector<FaultWindow>& windows,
                           std::chrono::milliseconds bound) {
  CancelsResult result;
  const auto boundNs = std::chrono::duration_cast<std::chrono::nanoseconds>(bound).count();
  std::map<std::string, OpenAcquire> open;  // by process
  for (const Op& op : history) {
    if (op.op == "acquire") {
      if (op.kind == Kind::Invoke) {
        open[op.process] = OpenAcquire{op.key, std::nullopt};
        continue;
      }
      const auto it = open.find(op.process);
      if (it == open.end()) continue;
      if (it->second.cancelNs && it->second.key == op.key) {
        const std::int64_t cancelNs = *it->second.cancelNs;
        ++result.judged;
        if (pausedBetween(windows, op.process, cancelNs, op.timeNs)) {
          ++result.excused;
        } else {
          const double tookMs = static_cast<double>(op.timeNs - cancelNs) / 1e6;
          result.maxMs = std::max(result.maxMs, tookMs);
          if (op.timeNs - cancelNs > boundNs) {
            if (result.first.empty()) {
              result.first = op.process + "'s acquire of '" + op.key + "' ended " + std::to_string(tookMs) +
                             " ms after its cancel (" + (op.kind == Kind::Ok ? "holding" : op.errorType.empty()
                                                                                              ? "timed out"
                                                                                              : op.errorType) +
                             ")";
            }
            ++result.slow;
          }
        }
      }
      open.erase(it);
      continue;
    }
    if (op.op != "cancel" || op.value != "acquire") continue;
    const auto it = open.find(op.process);
    if (it != open.end() && it->second.key == op.key && !it->second.cancelNs) it->second.cancelNs = op.timeNs;
  }
  return result;
}

}  // namespace dlock::nemesis
