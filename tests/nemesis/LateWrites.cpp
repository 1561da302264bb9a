// SPDX-License-Identifier: Apache-2.0
#include "LateWrites.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "ServerRecord.h"

namespace dlock::nemesis {
namespace {

constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;

// The deadline a script call carried: its last argument, when it reads as one (see the header).
std::optional<std::int64_t> deadlineOf(const std::string& caller, std::int64_t callMs) {
  if (caller.find("EVALSHA") == std::string::npos && caller.find("EVAL") == std::string::npos) return std::nullopt;
  const auto space = caller.find_last_of(' ');
  const std::string last = space == std::string::npos ? caller : caller.substr(space + 1);
  if (last.size() != 13 || !std::all_of(last.begin(), last.end(), [](unsigned char c) { return std::isdigit(c); })) {
    return std::nullopt;
  }
  const std::int64_t deadline = std::strtoll(last.c_str(), nullptr, 10);
  if (deadline < callMs - kDayMs || deadline > callMs + kDayMs) return std::nullopt;
  return deadline;
}

}  // namespace

LateWritesResult checkLateWrites(const std::vector<Op>& history) {
  LateWritesResult result;
  for (const Op& op : history) {
    if (op.process != "server" || op.op.rfind("server-", 0) != 0 || op.op == "server-watch") continue;
    const ServerStamp stamp = serverStamp(op);
    if (stamp.caller.empty()) continue;
    const std::int64_t callUs = stamp.serverUs - stamp.lagNs / 1000;
    const std::optional<std::int64_t> deadline = deadlineOf(stamp.caller, callUs / 1000);
    if (!deadline) continue;
    ++result.bounded;
    if (callUs / 1000 <= *deadline) continue;
    if (result.late++ == 0) {
      result.first = "key '" + op.key + "' on " + stamp.node + ": " + op.op + " " + op.value + " by a call the server ran " +
                     std::to_string(callUs / 1000 - *deadline) + " ms after the deadline it carried:" + stamp.caller;
    }
  }
  return result;
}

}  // namespace dlock::nemesis
