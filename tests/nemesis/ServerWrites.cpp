// SPDX-License-Identifier: Apache-2.0
#include "ServerWrites.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>

namespace dlock::nemesis {
namespace {

struct KeyModel {
  std::string owner;        // "" when deleted
  std::int64_t expiresNs = 0;
};

// `<node> <lag> | <caller args>`, as ServerObserver writes it.
std::string nodeOf(const std::string& message) { return message.substr(0, message.find(' ')); }

// When the lease a command set or extended started at the earliest: its caller's time.
std::int64_t leaseBase(const Op& op) {
  const auto space = op.message.find(' ');
  const auto bar = op.message.find(" |");
  if (space == std::string::npos || bar == std::string::npos || bar <= space) return op.timeNs;
  return op.timeNs - std::stoll(op.message.substr(space + 1, bar - space - 1));
}

std::string callerText(const std::string& message) {
  const auto bar = message.find(" |");
  const std::string text = bar == std::string::npos ? "" : message.substr(bar + 2);
  return text.size() > 160 ? text.substr(0, 160) + "..." : text;
}

bool callerCarries(const std::string& message, const std::string& token) {
  const auto bar = message.find(" |");
  if (bar == std::string::npos || token.empty()) return false;
  const std::string args = message.substr(bar + 2) + " ";
  return args.find(" " + token + " ") != std::string::npos;
}

std::string msLeft(std::int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

}  // namespace

ServerWritesResult checkServerWrites(const std::vector<Op>& history) {
  std::vector<const Op*> records;
  for (const Op& op : history) {
    if (op.process == "nemesis" && (op.op == "fault-start" || op.op == "fault-end") &&
        op.value.find("clock") != std::string::npos) {
      records.push_back(&op);
      continue;
    }
    if (op.process != "server") continue;
    if (op.op == "server-set" || op.op == "server-del" || op.op == "server-expire" || op.op == "server-watch") {
      records.push_back(&op);
    }
  }
  std::stable_sort(records.begin(), records.end(), [](const Op* a, const Op* b) { return a->timeNs < b->timeNs; });
  ServerWritesResult result;
  std::map<std::string, std::map<std::string, KeyModel>> nodes;  // node → key → model (absent: unknown)
  int clockFaults = 0;  // open windows of faults that move a server's clock
  for (const Op* op : records) {
    if (op->process == "nemesis") {
      // A server's clock moved: its keys may expire at any time until the fault ends.
      clockFaults += op->op == "fault-start" ? 1 : -1;
      nodes.clear();
      continue;
    }
    if (op->op == "server-watch" || clockFaults > 0) {
      nodes.erase(op->op == "server-watch" ? op->message : nodeOf(op->message));
      continue;
    }
    auto& keys = nodes[nodeOf(op->message)];
    const auto known = keys.find(op->key);
    const bool live = known != keys.end() && !known->second.owner.empty() && op->timeNs < known->second.expiresNs;
    const bool byOwner = live && callerCarries(op->message, known->second.owner);
    if (op->op == "server-expire") {
      if (byOwner) {
        known->second.expiresNs = leaseBase(*op) + std::stoll(op->value) * 1'000'000;
      } else if (known != keys.end()) {
        keys.erase(known);  // an extend the model cannot place: judge the key afresh
      }
      continue;
    }
    const bool overwrite = op->op == "server-set" && live && op->value != known->second.owner;
    const bool judged = known != keys.end() && (op->op == "server-del" || op->op == "server-set");
    if (judged) ++result.judged;
    if ((op->op == "server-del" || overwrite) && live && !byOwner) {
      ++result.violations;
      if (result.first.empty()) {
        result.first = "key '" + op->key + "' on " + nodeOf(op->message) + ": " +
                       (op->op == "server-del" ? "deleted" : "set for " + op->value) + " while " +
                       known->second.owner + " held it with " + msLeft(known->second.expiresNs - op->timeNs) +
                       " ms left, by a command without its token:" + callerText(op->message);
      }
    }
    if (op->op == "server-set") {
      const auto px = static_cast<std::int64_t>(op->token);
      keys[op->key] = KeyModel{op->value, px > 0 ? leaseBase(*op) + px * 1'000'000 : INT64_MAX};
    } else {
      keys[op->key] = KeyModel{};
    }
  }
  return result;
}

}  // namespace dlock::nemesis
