// SPDX-License-Identifier: Apache-2.0
#include "ServerWrites.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "FaultHits.h"
#include "Holds.h"
#include "ServerRecord.h"

namespace dlock::nemesis {
namespace {

struct KeyModel {
  std::string owner;            // "" when deleted
  std::int64_t expiresUs = 0;   // on the server's clock
  std::int64_t setNs = 0;       // when it was set, on this host's clock (fault windows')
  // Set for an owner no client's acquisition named (an orphan grant): when, on the server's clock.
  std::optional<std::int64_t> orphanSinceUs;
  std::int64_t orphanLeaseUs = 0;  // the PX it was granted with
  std::int64_t untilNs = 0;        // its expiry, mapped to this host's clock (the releases' check)
  bool placed = true;              // its set and last extend timed by the server's stamp
};

// A stretch of the record in which a key was set for one owner, on this host's clock.
struct Owned {
  std::string key;
  std::string owner;
  std::int64_t sinceNs = 0;
  std::int64_t untilNs = 0;
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

// When a fault moved a server's clock ("clock" in its name): at its start and its end, or all
// through it for a strobe. A key whose life spans a move may have expired unseen while the clock
// was ahead (the server's own expiry is not in its MONITOR stream), and then came back with the
// clock: the model forgets it. Every other key is judged, inside the fault too.
struct ClockMoves {
  std::vector<FaultWindow> windows;

  explicit ClockMoves(const std::vector<Op>& history) {
    for (const FaultWindow& window : faultWindows(history)) {
      if (window.name.find("clock") != std::string::npos) windows.push_back(window);
    }
  }
  // Whether the clock moved in (afterNs, atNs].
  [[nodiscard]] bool between(std::int64_t afterNs, std::int64_t atNs) const {
    return std::any_of(windows.begin(), windows.end(), [&](const FaultWindow& w) {
      const std::int64_t end = w.endNs.value_or(INT64_MAX);
      const bool strobe = w.name.find("strobing") != std::string::npos;
      if (strobe) return w.startNs <= atNs && end > afterNs;
      return (w.startNs > afterNs && w.startNs <= atNs) || (end > afterNs && end <= atNs);
    });
  }
};

// Each release that returned ok against the stretches its key was set for its owner (see the header).
void judgeReleases(const std::vector<Op>& history, const std::vector<Owned>& owned, ServerWritesResult& result) {
  for (const Hold& hold : extractHolds(history)) {
    if (hold.releaseOutcome != "ok" || !hold.releaseEndNs) continue;
    const std::int64_t at = *hold.releaseEndNs;
    bool known = false;
    for (const Owned& stretch : owned) {
      if (stretch.key != hold.key || stretch.owner != hold.ownerToken || stretch.sinceNs > at) continue;
      known = true;
      if (stretch.untilNs <= at + kReleaseSlackNs) continue;
      ++result.releasesKept;
      if (result.firstKept.empty()) {
        result.firstKept = "key '" + hold.key + "': " + hold.process + "'s release returned ok, the server held the key for " +
                           hold.ownerToken + " " +
                           (stretch.untilNs == INT64_MAX ? std::string("to the end of the record")
                                                         : msText((stretch.untilNs - at) / 1000) + " ms longer");
      }
      break;
    }
    if (known) ++result.releasesJudged;
  }
}

}  // namespace

ServerWritesResult checkServerWrites(const std::vector<Op>& history) {
  ServerWritesResult result;
  const ClockMoves clockMoves(history);
  const auto seen = seenOwners(history);
  // An orphan grant ends when its key is deleted, set for another owner or expires, whichever the
  // server saw first; one kept past the lease it was granted with (renewed, granted again) fails.
  const auto endOrphan = [&](const std::string& key, const KeyModel& model, std::int64_t atUs) {
    if (!model.orphanSinceUs) return;
    const std::int64_t lifeUs = std::min(atUs, model.expiresUs) - *model.orphanSinceUs;
    ++result.orphanGrants;
    result.orphanMaxUs = std::max(result.orphanMaxUs, lifeUs);
    if (lifeUs <= model.orphanLeaseUs) return;
    ++result.orphanViolations;
    if (result.firstOrphan.empty()) {
      result.firstOrphan = "key '" + key + "' set for " + model.owner + ", an owner no client acquired for, kept " +
                           (model.expiresUs == INT64_MAX ? std::string("with no TTL")
                                                          : msText(lifeUs) + " ms, granted for " +
                                                                msText(model.orphanLeaseUs) + " ms");
    }
  };
  struct Node {
    std::map<std::string, KeyModel> keys;  // absent: unknown
  };
  std::map<std::string, Node> nodes;
  std::vector<Owned> owned;  // every known stretch a key was set for an owner, closed
  // A stretch is judged only where its times are the server's stamps (not the moments the
  // observer read them, as while a clock moved) and no move of the clock falls inside it.
  const auto close = [&](const std::string& key, const KeyModel& model, std::int64_t atNs, bool placed) {
    const std::int64_t end = std::min(atNs, model.untilNs);
    if (model.owner.empty() || !placed || !model.placed || clockMoves.between(model.setNs, end)) return;
    owned.push_back({key, model.owner, model.setNs, end});
  };
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
    auto known = keys.find(op.key);
    if (known != keys.end() && clockMoves.between(known->second.setNs, op.timeNs)) {
      keys.erase(known);  // it may have expired unseen: judged afresh from its next SET or DEL (its stretch too)
      known = keys.end();
    }
    const bool live = known != keys.end() && !known->second.owner.empty() && stamp.serverUs < known->second.expiresUs;
    const bool byOwner = live && carries(stamp.caller, known->second.owner);
    // A lease set or extended by a script started no earlier than its call, nor than the command
    // (a clock moved back between the two).
    const std::int64_t baseUs = std::min(stamp.serverUs, stamp.serverUs - stamp.lagNs / 1000);
    if (op.op == "server-expire") {
      if (byOwner) {
        known->second.expiresUs = baseUs + std::stoll(op.value) * 1000;
        known->second.untilNs = op.timeNs + std::stoll(op.value) * 1'000'000;
        known->second.placed = known->second.placed && stamp.serverTimed;
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
    if (known != keys.end()) close(op.key, known->second, op.timeNs, stamp.serverTimed);
    if (op.op == "server-set") {
      const auto px = static_cast<std::int64_t>(op.token);
      KeyModel model{op.value, px > 0 ? baseUs + px * 1000 : INT64_MAX, op.timeNs, std::nullopt, 0,
                     px > 0 ? op.timeNs + px * 1'000'000 : INT64_MAX, stamp.serverTimed};
      const bool sameOrphan = known != keys.end() && known->second.owner == op.value && known->second.orphanSinceUs;
      if (sameOrphan) {
        model.orphanSinceUs = known->second.orphanSinceUs;
        model.orphanLeaseUs = known->second.orphanLeaseUs;
      } else if (seen.count({op.key, op.value}) == 0) {
        model.orphanSinceUs = stamp.serverUs;
        model.orphanLeaseUs = px * 1000;
      }
      keys[op.key] = model;
    } else {
      keys[op.key] = KeyModel{"", 0, op.timeNs, std::nullopt, 0, 0, stamp.serverTimed};
    }
  }
  // Orphans still set at the end of the record live until their expiry.
  for (const auto& [name, node] : nodes) {
    for (const auto& [key, model] : node.keys) {
      endOrphan(key, model, INT64_MAX);
      close(key, model, INT64_MAX, true);
    }
  }
  if (nodes.size() == 1) judgeReleases(history, owned, result);
  return result;
}

}  // namespace dlock::nemesis
