// SPDX-License-Identifier: Apache-2.0
#include "ServerWrites.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "FaultHits.h"
#include "ServerRecord.h"

namespace dlock::nemesis {
namespace {

struct KeyModel {
  std::string owner;            // "" when deleted
  std::int64_t expiresUs = 0;   // on the server's clock
};

bool carries(const std::string& caller, const std::string& token) {
  return !token.empty() && (" " + caller + " ").find(" " + token + " ") != std::string::npos;
}

std::string callerText(const std::string& caller) { return caller.size() > 160 ? caller.substr(0, 160) + "..." : caller; }

std::string msText(std::int64_t us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(us) / 1e3);
  return text;
}

// The windows of faults that move a server's clock ("clock" in the name).
std::vector<FaultWindow> clockWindows(const std::vector<Op>& history) {
  std::vector<FaultWindow> windows;
  for (const FaultWindow& window : faultWindows(history)) {
    if (window.name.find("clock") != std::string::npos) windows.push_back(window);
  }
  return windows;
}

// Whether a clock fault was open at `atNs`, or opened or closed between `afterNs` and `atNs`.
bool clockMoved(const std::vector<FaultWindow>& windows, std::int64_t afterNs, std::int64_t atNs) {
  return std::any_of(windows.begin(), windows.end(), [&](const FaultWindow& w) {
    const std::int64_t end = w.endNs.value_or(INT64_MAX);
    return (w.startNs <= atNs && end > atNs) || (w.startNs > afterNs && w.startNs <= atNs) ||
           (end > afterNs && end <= atNs);
  });
}

}  // namespace

ServerWritesResult checkServerWrites(const std::vector<Op>& history) {
  const std::vector<FaultWindow> clocks = clockWindows(history);
  ServerWritesResult result;
  struct Node {
    std::map<std::string, KeyModel> keys;  // absent: unknown
    std::int64_t lastNs = INT64_MIN;
  };
  std::map<std::string, Node> nodes;
  // Each server's records in the order of its stream (the file's order, one writer per server);
  // the expiry in the server's own clock, so a skew with this host's does not matter.
  for (const Op& op : history) {
    if (op.process != "server") continue;
    const bool watch = op.op == "server-watch";
    if (!watch && op.op != "server-set" && op.op != "server-del" && op.op != "server-expire") continue;
    const ServerStamp stamp = serverStamp(op);
    Node& node = nodes[stamp.node];
    const bool moved = clockMoved(clocks, node.lastNs, op.timeNs);
    node.lastNs = op.timeNs;
    if (watch || moved) {
      node.keys.clear();
      continue;
    }
    auto& keys = node.keys;
    const auto known = keys.find(op.key);
    const bool live = known != keys.end() && !known->second.owner.empty() && stamp.serverUs < known->second.expiresUs;
    const bool byOwner = live && carries(stamp.caller, known->second.owner);
    // A lease set or extended by a script started no earlier than its call.
    const std::int64_t baseUs = stamp.serverUs - stamp.lagNs / 1000;
    if (op.op == "server-expire") {
      if (byOwner) {
        known->second.expiresUs = baseUs + std::stoll(op.value) * 1000;
      } else if (known != keys.end()) {
        keys.erase(known);  // an extend the model cannot place: judge the key afresh
      }
      continue;
    }
    if (known != keys.end()) ++result.judged;
    const bool overwrite = op.op == "server-set" && live && op.value != known->second.owner;
    if ((op.op == "server-del" || overwrite) && live && !byOwner) {
      ++result.violations;
      if (result.first.empty()) {
        result.first = "key '" + op.key + "' on " + stamp.node + ": " +
                       (op.op == "server-del" ? "deleted" : "set for " + op.value) + " while " +
                       known->second.owner + " held it with " + msText(known->second.expiresUs - stamp.serverUs) +
                       " ms left, by a command without its token: " + callerText(stamp.caller);
      }
    }
    if (op.op == "server-set") {
      const auto px = static_cast<std::int64_t>(op.token);
      keys[op.key] = KeyModel{op.value, px > 0 ? baseUs + px * 1000 : INT64_MAX};
    } else {
      keys[op.key] = KeyModel{};
    }
  }
  return result;
}

}  // namespace dlock::nemesis
