// SPDX-License-Identifier: Apache-2.0
#include "ServerWrites.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "ServerRecord.h"

namespace dlock::nemesis {
namespace {

struct KeyModel {
  std::string owner;            // "" when deleted
  std::int64_t expiresUs = 0;   // on the server's clock
  // Set for an owner no client's acquisition named (an orphan grant): when, on the server's clock.
  std::optional<std::int64_t> orphanSinceUs;
};

// The owner tokens of every acquisition a client saw complete, by key.
std::set<std::pair<std::string, std::string>> seenOwners(const std::vector<Op>& history) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const Op& op : history) {
    if (op.process != "server" && op.op == "acquire" && op.kind == Kind::Ok) seen.emplace(op.key, op.value);
  }
  return seen;
}

bool carries(const std::string& caller, const std::string& token) {
  return !token.empty() && (" " + caller + " ").find(" " + token + " ") != std::string::npos;
}

std::string callerText(const std::string& caller) { return caller.size() > 160 ? caller.substr(0, 160) + "..." : caller; }

std::string msText(std::int64_t us) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(us) / 1e3);
  return text;
}

}  // namespace

ServerWritesResult checkServerWrites(const std::vector<Op>& history, std::chrono::milliseconds orphanBound) {
  ServerWritesResult result;
  const auto seen = seenOwners(history);
  const std::int64_t boundUs = std::chrono::duration_cast<std::chrono::microseconds>(orphanBound).count();
  // An orphan grant ends when its key is deleted, set again or expires, whichever the server saw
  // first; one that outlives the bound fails.
  const auto endOrphan = [&](const std::string& key, const KeyModel& model, std::int64_t atUs) {
    if (!model.orphanSinceUs) return;
    const std::int64_t lifeUs = std::min(atUs, model.expiresUs) - *model.orphanSinceUs;
    ++result.orphanGrants;
    result.orphanMaxUs = std::max(result.orphanMaxUs, lifeUs);
    if (lifeUs <= boundUs) return;
    ++result.orphanViolations;
    if (result.firstOrphan.empty()) {
      result.firstOrphan = "key '" + key + "' set for " + model.owner + ", an owner no client acquired for, kept " +
                           (model.expiresUs == INT64_MAX ? std::string("with no TTL") : msText(lifeUs) + " ms");
    }
  };
  struct Node {
    std::map<std::string, KeyModel> keys;  // absent: unknown
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
    if (watch) {
      node.keys.clear();  // an orphan's end went unseen: not judged
      continue;
    }
    auto& keys = node.keys;
    const auto known = keys.find(op.key);
    const bool live = known != keys.end() && !known->second.owner.empty() && stamp.serverUs < known->second.expiresUs;
    const bool byOwner = live && carries(stamp.caller, known->second.owner);
    // A lease set or extended by a script started no earlier than its call, nor than the command
    // (a clock moved back between the two).
    const std::int64_t baseUs = std::min(stamp.serverUs, stamp.serverUs - stamp.lagNs / 1000);
    if (op.op == "server-expire") {
      if (byOwner) {
        known->second.expiresUs = baseUs + std::stoll(op.value) * 1000;
      } else if (live) {
        ++result.judged;
        ++result.violations;
        if (result.first.empty()) {
          result.first = "key '" + op.key + "' on " + stamp.node + ": extended by " + std::to_string(std::stoll(op.value)) +
                         " ms while " + known->second.owner + " held it with " +
                         msText(known->second.expiresUs - stamp.serverUs) +
                         " ms left, by a command without its token: " + callerText(stamp.caller);
        }
      }
      // An extend of a key deleted or expired in the model changes nothing there (the script
      // found no key of its token); the model keeps what it knows.
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
    if (known != keys.end() && (op.op == "server-del" || op.value != known->second.owner)) {
      endOrphan(op.key, known->second, stamp.serverUs);
    }
    if (op.op == "server-set") {
      const auto px = static_cast<std::int64_t>(op.token);
      KeyModel model{op.value, px > 0 ? baseUs + px * 1000 : INT64_MAX, std::nullopt};
      const bool sameOrphan = known != keys.end() && known->second.owner == op.value && known->second.orphanSinceUs;
      if (sameOrphan) {
        model.orphanSinceUs = known->second.orphanSinceUs;
      } else if (seen.count({op.key, op.value}) == 0) {
        model.orphanSinceUs = stamp.serverUs;
      }
      keys[op.key] = model;
    } else {
      keys[op.key] = KeyModel{};
    }
  }
  // Orphans still set at the end of the record live until their expiry.
  for (const auto& [name, node] : nodes) {
    for (const auto& [key, model] : node.keys) endOrphan(key, model, INT64_MAX);
  }
  return result;
}

}  // namespace dlock::nemesis
