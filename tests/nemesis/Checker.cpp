// SPDX-License-Identifier: Apache-2.0
#include "Checker.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "CancelChecks.h"
#include "FairOrder.h"
#include "LateWrites.h"
#include "Holds.h"
#include "redis/src/KeyNames.h"
#include "ServerRecord.h"
#include "ServerWrites.h"
#include "ConditionChecks.h"
#include "ElectionChecks.h"
#include "SharedChecks.h"

namespace dlock::nemesis {
namespace {

constexpr const char* kNemesis = "nemesis";
constexpr const char* kServer = "server";  // ServerObserver's records

bool isClient(const std::string& process) { return process != kNemesis && process != kServer; }

std::string ms(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", value);
  return text;
}

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof escaped, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string joinCounts(const std::map<std::string, long long>& counts, const char* separator) {
  std::string out;
  for (const auto& [name, count] : counts) {
    if (!out.empty()) out += separator;
    out += name + " " + std::to_string(count);
  }
  return out.empty() ? "none" : out;
}

void fail(CheckResult& check, const std::string& reason) {
  check.passed = false;
  check.reason = reason;
}

// A check that cannot fail in this run is out of its verdict, saying why.
void leaveOut(CheckResult& check, const std::string& why) {
  check.judged = false;
  check.reason = "not judged: " + why;
}

// Check 1.
void checkFencedStore(const CheckerInput& input, const std::vector<Hold>& holds, Report& report) {
  CheckResult& check = report.checks[0];
  std::string first;
  // A client's word that the store accepted its write, against the store's own list.
  for (const Hold& hold : holds) {
    if (hold.fencedWriteOutcome != "accepted") continue;
    const auto shot = input.store.find(hold.key);
    if (shot == input.store.end()) continue;
    const auto& tokens = shot->second.acceptedTokens;
    if (std::find(tokens.begin(), tokens.end(), hold.token) == tokens.end()) {
      ++report.fencedStoreViolations;
      if (first.empty()) {
        first = "key '" + hold.key + "': " + hold.process + " says token " + std::to_string(hold.token) +
                " was accepted; the store has no such write";
      }
    }
  }
  for (const auto& [key, shot] : input.store) {
    for (std::size_t i = 1; i < shot.acceptedTokens.size(); ++i) {
      if (shot.acceptedTokens[i] <= shot.acceptedTokens[i - 1]) {
        ++report.fencedStoreViolations;
        if (first.empty()) {
          first = "key '" + key + "': accepted token " + std::to_string(shot.acceptedTokens[i]) + " after " +
                  std::to_string(shot.acceptedTokens[i - 1]);
        }
      }
    }
    if (shot.acceptedCount != static_cast<long long>(shot.acceptedTokens.size())) {
      ++report.fencedStoreViolations;
      if (first.empty()) {
        first = "key '" + key + "': count " + std::to_string(shot.acceptedCount) + " but " +
                std::to_string(shot.acceptedTokens.size()) + " accepted tokens";
      }
    }
  }
  if (report.fencedStoreViolations > 0) {
    fail(check, std::to_string(report.fencedStoreViolations) + " violations; first: " + first);
  } else {
    check.reason = "accepted tokens strictly increase on " + std::to_string(input.store.size()) + " keys";
  }
}

// Check 3: sweep the acquisitions of a key by invoke time, keeping the highest token among those
// completed before it.
void checkFencingOrder(const CheckerInput& input, const std::vector<Hold>& holds, Report& report) {
  std::map<std::string, std::vector<const Hold*>> perKey;
  for (const Hold& hold : holds) perKey[hold.key].push_back(&hold);
  std::string first;
  for (auto& [key, list] : perKey) {
    std::vector<const Hold*> byOk = list;
    std::vector<const Hold*> byInvoke = list;
    std::sort(byOk.begin(), byOk.end(), [](const Hold* a, const Hold* b) { return a->acquireOkNs < b->acquireOkNs; });
    std::sort(byInvoke.begin(), byInvoke.end(),
              [](const Hold* a, const Hold* b) { return a->acquireInvokeNs < b->acquireInvokeNs; });
    std::size_t next = 0;
    const Hold* highest = nullptr;
    for (const Hold* b : byInvoke) {
      while (next < byOk.size() && byOk[next]->acquireOkNs < b->acquireInvokeNs) {
        if (highest == nullptr || byOk[next]->token > highest->token) highest = byOk[next];
        ++next;
      }
      if (highest != nullptr && highest->token >= b->token) {
        ++report.fenceRegressions;
        if (first.empty()) {
          first = "key '" + key + "': " + b->process + " got token " + std::to_string(b->token) + " after " +
                  highest->process + " had completed with " + std::to_string(highest->token);
        }
      }
    }
  }
  const std::string acquisitions = std::to_string(holds.size()) + " acquisitions";
  if (!input.fenceRegressionCause.empty()) {
    if (report.fenceRegressions == 0) {
      fail(report.checks[2], "tokens were meant to go back here (" + input.fenceRegressionCause +
                                 ") and never did in " + acquisitions + ": the run shows nothing");
    } else {
      report.checks[2].reason = std::to_string(report.fenceRegressions) + " regressions, allowed here: " +
                                input.fenceRegressionCause + "; first: " + first;
    }
  } else if (report.fenceRegressions > 0) {
    fail(report.checks[2], std::to_string(report.fenceRegressions) + " regressions; first: " + first);
  } else {
    report.checks[2].reason = "tokens never went backwards in " + acquisitions;
  }
}

const ClientExit* exitOf(const CheckerInput& input, const std::string& process) {
  for (const ClientExit& exit : input.exits) {
    if (exit.process == process) return &exit;
  }
  return nullptr;
}

// Check 4.
void checkRecovery(const CheckerInput& input, const std::map<std::string, std::vector<Op>>& processes,
                   const std::vector<FaultWindow>& windows, Report& report) {
  const auto bound = std::chrono::duration_cast<std::chrono::nanoseconds>(input.recoveryBound).count();
  std::string first;
  for (const FaultWindow& ended : windows) {
    if (!ended.endNs) continue;
    const std::int64_t end = *ended.endNs;
    std::int64_t nextStart = INT64_MAX;
    for (const FaultWindow& other : windows) {
      if (other.startNs > end && other.startNs < nextStart) nextStart = other.startNs;
    }
    for (const auto& [process, ops] : processes) {
      if (!isClient(process) || ops.empty() || ops.front().timeNs > end) continue;
      std::optional<std::int64_t> recovered;
      for (const Op& op : ops) {
        if (op.op == "acquire" && op.kind == Kind::Ok && op.timeNs > end) {
          recovered = op.timeNs;
          break;
        }
      }
      if (recovered && *recovered - end <= bound) {
        report.recoveryMs.push_back(static_cast<double>(*recovered - end) / 1e6);
        continue;
      }
      // Not expected to recover: killed by the nemesis, or the target of a fault, within the bound.
      const ClientExit* exit = exitOf(input, process);
      if (exit != nullptr && exit->killedByNemesis && exit->killedNs.value_or(ops.back().timeNs) < end + bound) continue;
      const auto& client = process;  // a structured binding: C++17 lambdas cannot capture one
      const bool targeted = std::any_of(windows.begin(), windows.end(), [&](const FaultWindow& w) {
        return w.target == client && w.startNs < end + bound && w.endNs.value_or(INT64_MAX) > end;
      });
      if (targeted) continue;
      if (nextStart < end + bound) {
        ++report.recoveryInterrupted;
      } else if (ops.back().timeNs < end + bound) {
        ++report.recoveryUnobserved;
      } else {
        ++report.recoveryViolations;
        if (first.empty()) {
          first = process + " acquired nothing within " + std::to_string(input.recoveryBound.count()) + " ms after '" +
                  ended.name + "' ended";
        }
      }
    }
  }
  std::vector<double> sorted = report.recoveryMs;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    report.recoveryP50Ms = sorted[(sorted.size() - 1) / 2];
    report.recoveryMaxMs = sorted.back();
  }
  const std::string counts = std::to_string(report.recoveryMs.size()) + " recovered (p50 " + ms(report.recoveryP50Ms) +
                             " ms, max " + ms(report.recoveryMaxMs) + " ms), " +
                             std::to_string(report.recoveryUnobserved) + " not observed (history ended), " +
                             std::to_string(report.recoveryInterrupted) + " interrupted by the next fault";
  if (report.recoveryViolations > 0) {
    fail(report.checks[3], std::to_string(report.recoveryViolations) + " did not recover; first: " + first + "; " + counts);
  } else if (report.recoveryUnobserved > 0) {
    fail(report.checks[3], std::to_string(report.recoveryUnobserved) + " recoveries could not be observed; " + counts);
  } else {
    report.checks[3].reason = counts;
  }
}

// Check 5.
void checkErrorsAndExits(const CheckerInput& input, const std::map<std::string, std::vector<Op>>& processes,
                         Report& report) {
  std::string first;
  long long untyped = 0;
  for (const Op& op : input.history) {
    if (op.errorType.empty() || op.op == "hang") continue;
    ++report.errorsByType[op.errorType];
    if (!isTypedError(op.errorType)) {
      ++untyped;
      if (first.empty()) first = op.process + " " + op.op + ": untyped error " + op.errorType + " (" + op.message + ")";
    }
  }
  std::set<std::string> clients;
  for (const auto& [process, ops] : processes) {
    if (isClient(process)) clients.insert(process);
  }
  for (const ClientExit& exit : input.exits) clients.insert(exit.process);
  long long unknown = 0;
  for (const std::string& process : clients) {
    const ClientExit* exit = exitOf(input, process);
    if (exit == nullptr) {
      ++unknown;
      if (first.empty()) first = process + ": no exit status";
      continue;
    }
    if (exit->killedAtDeadline || (exit->signal == 0 && exit->exitCode == kHangExitCode)) {
      ++report.hangs;
      if (first.empty()) first = process + ": hung";
    } else if (!exit->killedByNemesis && (exit->signal != 0 || exit->exitCode != 0)) {
      ++report.crashes;
      if (first.empty()) {
        first = process + (exit->signal != 0 ? ": killed by signal " + std::to_string(exit->signal)
                                             : ": exited with " + std::to_string(exit->exitCode));
      }
    }
  }
  const std::string counts = std::to_string(untyped) + " untyped errors, " + std::to_string(report.crashes) +
                             " crashes, " + std::to_string(report.hangs) + " hangs, " + std::to_string(unknown) +
                             " clients without an exit status";
  if (untyped + report.crashes + report.hangs + unknown > 0) {
    fail(report.checks[4], counts + "; first: " + first);
  } else {
    report.checks[4].reason = counts + "; errors: " + joinCounts(report.errorsByType, ", ");
  }
}

// Check 6.
void checkTtls(const CheckerInput& input, Report& report) {
  std::string first;
  for (const std::string& key : input.keysWithoutTtl) {
    if (isFenceCounter(key, input.keyPrefix)) continue;
    ++report.keysWithoutTtl;
    if (first.empty()) first = key;
  }
  std::string leftover;  // a semaphore's permits still counted in use once every lease ended
  for (const auto& [key, inUse] : input.permitsInUseAfter) {
    if (inUse != 0 && leftover.empty()) {
      leftover = "; semaphore '" + key + "': " + (inUse < 0 ? std::string("unreadable") : std::to_string(inUse) + " permits") +
                 " in use after the run, not 0 (available != capacity)";
    }
  }
  for (const auto& [condition, waiters] : input.conditionWaitersAfter) {
    if (waiters != 0 && leftover.empty()) {
      leftover = "; condition '" + condition + "': " + (waiters < 0 ? std::string("unreadable") : std::to_string(waiters) + " waiters") +
                 " left after every waiter lease ended, not 0";
    }
  }
  if (report.keysWithoutTtl > 0) {
    fail(report.checks[5], std::to_string(report.keysWithoutTtl) + " keys without a TTL that are not fence counters; first: " + first + leftover);
  } else if (!leftover.empty()) {
    fail(report.checks[5], leftover.substr(2));
  } else {
    report.checks[5].reason = std::to_string(input.keysWithoutTtl.size()) + " keys without a TTL, all fence counters" +
                              (input.permitsInUseAfter.empty() ? std::string()
                                                               : "; every semaphore back to its capacity after the run") +
                              (input.conditionWaitersAfter.empty() ? std::string()
                                                                   : "; no condition waiter left after the run");
  }
}

// One key's holds and records, indexed once for the loss checks: a run can have tens of
// thousands of holds and a million records.
struct KeyIndex {
  std::vector<const Hold*> holds;           // by acquireOkNs
  std::vector<const Op*> serverSets;        // the server's SETs of the key, by time
  std::unordered_map<std::uint64_t, const Hold*> byToken;
  std::vector<std::uint64_t> accepted;      // the store's accepted tokens, ascending
  std::unordered_set<std::uint64_t> acceptedSet;

  [[nodiscard]] bool storeAccepted(std::uint64_t token) const { return acceptedSet.count(token) > 0; }
};

// Whether the store's refusal of `hold`'s fenced write (its token not in the store's list) is
// evidence of a later holder: an accepted token at or above it from a hold acquired after it and
// before its write ended (a write follows its acquire), or from no hold on record, or no such
// token at all. Where tokens went back (check 3's named cause), an earlier holder's higher token
// refuses the writes of the later ones, and so do the tokens of holds that come after the clock
// caught up; neither is a loss.
bool refusedForALaterHolder(const Hold& hold, const KeyIndex& index) {
  if (index.storeAccepted(hold.token)) return false;
  bool explained = false;
  for (auto it = std::lower_bound(index.accepted.begin(), index.accepted.end(), hold.token); it != index.accepted.end();
       ++it) {
    const auto owner = index.byToken.find(*it);
    if (owner == index.byToken.end() || owner->second == &hold) return true;
    const Hold& other = *owner->second;
    if (other.acquireOkNs > hold.acquireOkNs && other.acquireOkNs < hold.fencedWriteEndNs.value_or(INT64_MAX)) {
      return true;
    }
    explained = true;
  }
  return !explained;
}

// Evidence that a hold was lost inside its section, from outside the holder: another process's
// acquisition of the key completed inside the section, the server's record of the key set for
// another owner inside it, or the store refused the hold's fenced write because a later holder
// had written. Every one is judged (an overlap each), the earliest also for the loss's notice.
struct LossEvidence {
  std::int64_t atNs = 0;
  std::string what;
};

// Every loss event inside `hold`'s section, earliest first: each other owner once (its
// acquisition, or the server's SET for it when that came first), and the store's refusal.
std::vector<LossEvidence> lossEvidence(const CheckerInput& input, const Hold& hold, const KeyIndex& index) {
  // A holder killed inside its section was inside it until the kill, not until its last record.
  std::int64_t sectionEnd = hold.sectionEndNs;
  const ClientExit* exit = exitOf(input, hold.process);
  if (!hold.releaseInvokeNs && exit != nullptr && exit->killedNs) sectionEnd = std::max(sectionEnd, *exit->killedNs);
  std::map<std::string, LossEvidence> byOwner;  // other owner token (or token) -> its earliest event
  const auto note = [&byOwner](const std::string& owner, LossEvidence event) {
    const auto [it, added] = byOwner.emplace(owner, event);
    if (!added && event.atNs < it->second.atNs) it->second = std::move(event);
  };
  const auto later = std::upper_bound(index.holds.begin(), index.holds.end(), hold.acquireOkNs,
                                      [](std::int64_t at, const Hold* other) { return at < other->acquireOkNs; });
  for (auto it = later; it != index.holds.end() && (*it)->acquireOkNs < sectionEnd; ++it) {
    const Hold* other = *it;
    if (other->process == hold.process) continue;
    note(other->ownerToken.empty() ? "#" + std::to_string(other->token) : other->ownerToken,
         LossEvidence{other->acquireOkNs, other->process + " acquired token " + std::to_string(other->token)});
  }
  // The server's own record: the key set for another owner inside the section.
  if (!hold.ownerToken.empty() && input.serverSetsShowLosses) {
    const auto after = std::upper_bound(index.serverSets.begin(), index.serverSets.end(), hold.acquireOkNs,
                                        [](std::int64_t at, const Op* set) { return at < set->timeNs; });
    for (auto it = after; it != index.serverSets.end() && (*it)->timeNs < sectionEnd; ++it) {
      if ((*it)->value == hold.ownerToken) continue;
      note((*it)->value, LossEvidence{(*it)->timeNs, "the server set the key for another owner"});
    }
  }
  std::vector<LossEvidence> events;
  for (auto& [owner, event] : byOwner) events.push_back(std::move(event));
  if (hold.fencedWriteEndNs && input.store.count(hold.key) > 0 && refusedForALaterHolder(hold, index)) {
    events.push_back(LossEvidence{*hold.fencedWriteEndNs, "the store refused its fenced write"});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const LossEvidence& a, const LossEvidence& b) { return a.atNs < b.atNs; });
  return events;
}

std::string msText(std::int64_t ns) { return ms(static_cast<double>(ns) / 1e6); }

// Where the hold's evidence stood at `atNs`, for a story.
std::string validityNote(const Hold& hold, std::int64_t atNs) {
  const auto until = hold.validUntil(atNs);
  if (!until) return "";
  return " (" + msText(*until - atNs) + " ms of validity left by the evidence, sent " +
         msText(atNs - hold.coveringSend(atNs).value_or(atNs)) + " ms before)";
}

std::string vouchedStory(const Hold& hold, std::int64_t atNs) {
  std::int64_t lastEnd = 0;
  for (const auto& [sent, until] : hold.evidence) {
    if (sent <= atNs) lastEnd = std::max(lastEnd, until);
  }
  return "key '" + hold.key + "': the lock vouched for " + hold.process + "'s token " + std::to_string(hold.token) +
         (lastEnd == 0 ? std::string(" with no confirmed acquisition or renewal behind it")
                       : " " + msText(atNs - lastEnd) + " ms after its evidence ran out");
}

// The process a fault acted on, when it acted on one process (paused, killed, cut off), else "".
std::string faultedProcess(const FaultWindow& window) {
  for (const char* verb : {"SIGSTOP ", "SIGKILL ", "partition "}) {
    const std::string_view prefix = verb;
    if (window.name.rfind(prefix, 0) == 0 && window.name.size() > prefix.size() && window.name[prefix.size()] == 'c') {
      return window.name.substr(prefix.size(), window.name.find(' ', prefix.size()) - prefix.size());
    }
  }
  return "";
}

// An overlap check 8 excused: the overlapped hold and when the other came in (check 2's bound).
struct ExcusedOverlap {
  const Hold* hold = nullptr;
  std::int64_t atNs = 0;
};

// Whether a lost hold's holder was told in time: before its release returned (a release failing
// with LockLostError is itself the notice), or, when the release failed otherwise (in doubt), by
// a notice within one lease of its return; a release that returned ok first is untold, whatever
// came after. A hold never released (its process ended) is told by any notice.
bool toldInTime(const CheckerInput& input, const Hold& hold) {
  if (!hold.toldNs) return false;
  if (!hold.releaseEndNs || *hold.toldNs <= *hold.releaseEndNs) return true;
  const auto bound = std::chrono::duration_cast<std::chrono::nanoseconds>(input.lease).count();
  return hold.releaseOutcome != "ok" && *hold.toldNs <= *hold.releaseEndNs + bound;
}

// Whether the scenario's named cause covers an overlap of `hold` at `atNs`: a fault on the servers
// (lost writes, a failover, a clock) that started by then, and the hold's evidence valid at that
// moment was sent before the fault ended (the state the fault touched). A fault on one process
// (a pause) cannot make the server let another in while the holder's evidence is valid: it covers
// no such overlap.
bool excusedOverlap(const CheckerInput& input, const std::vector<FaultWindow>& windows, const Hold& hold,
                    std::int64_t atNs) {
  if (input.overlapCause.empty()) return false;
  const auto sent = hold.coveringSend(atNs);
  if (!sent) return false;
  return std::any_of(windows.begin(), windows.end(), [&](const FaultWindow& window) {
    return faultedProcess(window).empty() && window.startNs <= atNs && *sent < window.endNs.value_or(INT64_MAX);
  });
}

// The writes of a paused process that landed after its hold's evidence ran out: the one overlap a
// paused process makes (its write, held up past its lease), each as (invoke, landing).
std::vector<std::pair<std::int64_t, std::int64_t>> pausedLateWrites(const std::vector<FaultWindow>& windows,
                                                                     const Hold& hold) {
  std::vector<std::pair<std::int64_t, std::int64_t>> late;
  for (const auto& [invoked, landed] : hold.writes) {
    const auto until = hold.validUntil(invoked);
    if (until && landed < *until) continue;
    for (const FaultWindow& window : windows) {
      if (window.name.rfind("SIGSTOP ", 0) == 0 && faultedProcess(window) == hold.process &&
          window.startNs < landed && window.endNs.value_or(INT64_MAX) > invoked) {
        late.emplace_back(invoked, landed);
        break;
      }
    }
  }
  return late;
}

// Check 2, key by key: the writes that completed against the counter. A key short of its writes
// lost updates, allowed only where the scenario names a cause, and only as many as the writes
// that landed inside what a fault with it excused on that key: from an excused overlap of check 8
// to the end of the overlapped hold (its section or its last write's landing), and a paused
// writer's late write from its invoke to its landing (a stale read-modify-write loses at most the
// writes that landed meanwhile, itself included). A key above its writes counts more than the
// writes whose outcome is unknown (errors) could have added.
void countLostUpdates(const CheckerInput& input, const std::vector<Hold>& holds, const std::vector<FaultWindow>& windows,
                      const std::vector<ExcusedOverlap>& excused, Report& report) {
  std::map<std::string, long long> sets;
  std::map<std::string, long long> unknown;
  std::map<std::string, std::vector<std::int64_t>> landings;
  for (const Op& op : input.history) {
    if (op.op != "write") continue;
    if (op.kind == Kind::Ok) {
      ++sets[op.key];
      landings[op.key].push_back(op.timeNs);
    }
    if (op.kind == Kind::Fail) ++unknown[op.key];
  }
  std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>> excuses;  // per key
  if (!input.overlapCause.empty()) {
    for (const ExcusedOverlap& overlap : excused) {
      std::int64_t end = overlap.hold->sectionEndNs;
      for (const auto& write : overlap.hold->writes) end = std::max(end, write.second);
      excuses[overlap.hold->key].emplace_back(overlap.atNs, end);
    }
    for (const Hold& hold : holds) {
      for (const auto& write : pausedLateWrites(windows, hold)) excuses[hold.key].push_back(write);
    }
  }
  const auto allowance = [&](const std::string& key) {
    long long allowed = 0;
    for (const std::int64_t landed : landings[key]) {
      const auto& spans = excuses[key];
      if (std::any_of(spans.begin(), spans.end(),
                      [landed](const auto& span) { return span.first <= landed && landed <= span.second; })) {
        ++allowed;
      }
    }
    return allowed;
  };
  std::string first;
  long long unexplained = 0;
  for (const auto& [key, shot] : input.store) {
    const long long lost = sets[key] - shot.counter;
    report.unfencedLostByKey[key] = lost;
    if (lost > 0) report.unfencedLostUpdates += lost;
    if (lost < 0) report.unfencedSurplus += -lost;
    const long long allowed = lost > 0 ? allowance(key) : 0;
    if ((lost > 0 && lost > allowed) || -lost > unknown[key]) {
      ++unexplained;
      if (first.empty()) {
        first = "key '" + key + "': " + std::to_string(sets[key]) + " writes completed, counter " +
                std::to_string(shot.counter) + (lost > 0 ? "" : ", " + std::to_string(unknown[key]) + " in doubt") +
                (lost > 0 && !input.overlapCause.empty()
                     ? " (" + std::to_string(allowed) + " writes landed inside what a fault with the named cause excused)"
                     : "");
      }
    }
  }
  const std::string counts = std::to_string(report.unfencedLostUpdates) + " unfenced updates lost, " +
                             std::to_string(report.unfencedSurplus) + " counted beyond the writes, per key";
  if (unexplained > 0) {
    fail(report.checks[1], counts + "; " + std::to_string(unexplained) + " keys unexplained; first: " + first);
  } else {
    report.checks[1].reason = counts + (report.unfencedLostUpdates > 0 ? " (" + input.overlapCause + ")" : "");
  }
}

// Each key's holds, server SETs and accepted tokens, indexed once.
std::map<std::string, KeyIndex> indexByKey(const CheckerInput& input, const std::vector<Hold>& holds) {
  std::map<std::string, KeyIndex> perKey;
  for (const Hold& hold : holds) {
    KeyIndex& index = perKey[hold.key];
    index.holds.push_back(&hold);
    index.byToken.emplace(hold.token, &hold);
  }
  for (const Op& op : input.history) {
    // A line read late (the server's clock was moved) cannot place a loss.
    if (op.process != kServer || op.op != "server-set" || !serverStamp(op).serverTimed) continue;
    const auto index = perKey.find(op.key);
    if (index != perKey.end()) index->second.serverSets.push_back(&op);
  }
  for (auto& [key, index] : perKey) {
    std::sort(index.holds.begin(), index.holds.end(),
              [](const Hold* a, const Hold* b) { return a->acquireOkNs < b->acquireOkNs; });
    std::stable_sort(index.serverSets.begin(), index.serverSets.end(),
                     [](const Op* a, const Op* b) { return a->timeNs < b->timeNs; });
    if (const auto shot = input.store.find(key); shot != input.store.end()) {
      index.accepted = shot->second.acceptedTokens;
      std::sort(index.accepted.begin(), index.accepted.end());
      index.acceptedSet.insert(index.accepted.begin(), index.accepted.end());
    }
  }
  return perKey;
}

// Checks 7 and 8, hold by hold; the overlaps a named cause excused, for check 2.
void checkLostLeases(const CheckerInput& input, const std::vector<Hold>& holds, const std::vector<FaultWindow>& windows,
                     std::vector<ExcusedOverlap>& excused, Report& report) {
  std::map<std::string, KeyIndex> perKey = indexByKey(input, holds);
  std::string firstUntold;
  std::string firstOverlap;
  for (auto& [key, index] : perKey) {
    for (const Hold* hold : index.holds) {
      if (hold->fencedWriteEndNs && input.store.count(key) > 0 && !index.storeAccepted(hold->token)) {
        ++report.storeRefusedHolds;
      }
      for (const std::int64_t at : hold->vouchedNs) {
        if (hold->validAt(at)) continue;
        ++report.vouchedPastEvidence;
        ++report.exclusionViolations;
        if (firstOverlap.empty()) firstOverlap = vouchedStory(*hold, at);
        break;
      }
      const std::vector<LossEvidence> events = lossEvidence(input, *hold, index);
      if (events.empty()) continue;
      const LossEvidence& loss = events.front();
      if (loss.what.rfind("the server", 0) == 0) ++report.lossesSeenByServer;
      const auto& heldKey = key;  // a structured binding: C++17 lambdas cannot capture one
      const auto story = [&](const LossEvidence& event) {
        return "key '" + heldKey + "': " + hold->process + " held token " + std::to_string(hold->token) + " when " +
               event.what + "; release: " + (hold->releaseOutcome.empty() ? "none" : hold->releaseOutcome);
      };
      const ClientExit* exit = exitOf(input, hold->process);
      if (exit != nullptr && exit->killedByNemesis && exit->killedNs && *exit->killedNs < loss.atNs &&
          !hold->releaseInvokeNs) {
        ++report.lostHolderKilled;
        continue;
      }
      if (toldInTime(input, *hold)) {
        ++report.lostTold;
      } else {
        ++report.lostUntold;
        if (firstUntold.empty()) firstUntold = story(loss) + (hold->toldNs ? " (told only after its release returned)" : "");
      }
      // No confirmed send still valid when the other came in: the lease had ended (whether the
      // holder saw it is the vouching above).
      if (!hold->validAt(loss.atNs)) ++report.lostExpiredFirst;
      // Every later acquisition inside the hold is judged too: a renewal after the first loss
      // (a broken extend) makes the evidence valid again beside the next holder.
      for (const LossEvidence& event : events) {
        if (!hold->validAt(event.atNs)) continue;
        ++report.overlapsWhileValid;
        if (excusedOverlap(input, windows, *hold, event.atNs)) {
          ++report.overlapsExcused;
          excused.push_back(ExcusedOverlap{hold, event.atNs});
        } else {
          ++report.exclusionViolations;
          if (firstOverlap.empty()) firstOverlap = story(event) + validityNote(*hold, event.atNs);
        }
      }
    }
  }
  const std::string counts = std::to_string(report.lostTold) + " lost leases told, " + std::to_string(report.lostUntold) +
                             " untold, " + std::to_string(report.lostHolderKilled) + " with the holder killed first, " +
                             std::to_string(report.lostExpiredFirst) + " ended for the holder first";
  if (report.lostUntold > 0) {
    fail(report.checks[6], counts + "; first: " + firstUntold);
  } else {
    report.checks[6].reason = counts;
  }
  const std::string overlaps = std::to_string(report.overlapsWhileValid) + " losses while the evidence showed the " +
                               "holder's lease valid (" + std::to_string(report.overlapsExcused) +
                               " inside a fault with the named cause), " + std::to_string(report.vouchedPastEvidence) +
                               " holds vouched for past their evidence";
  if (report.exclusionViolations > 0) {
    fail(report.checks[7], overlaps + "; first: " + firstOverlap);
  } else {
    report.checks[7].reason = overlaps + (input.overlapCause.empty() ? "" : "; the named cause: " + input.overlapCause);
  }
}

// Check 9.
void checkFaultsOnHolders(const CheckerInput& input, Report& report) {
  std::string missed;
  for (const FaultHit& hit : assessFaults(input.history, input.faults)) {
    ++report.faults;
    if (hit.asExpected) ++report.faultsOnHolders;
    if (hit.holderHit && hit.taken) ++report.faultsKeyTaken;
    if (hit.asExpected) continue;
    ++report.faultMisses;
    if (!missed.empty()) continue;
    missed = "'" + hit.window.name + "': " +
             (aimsAtCanceller(hit.window) ? std::string("its target's wait did not end on a cancel inside it")
              : aimsAtWaiter(hit.window)  ? std::string("its target was not waiting for the key")
              : !hit.holderHit         ? std::string("no holder inside its section")
                                       : std::string(hit.taken ? "key taken by " + hit.takenBy : "key not taken") +
                                     (hit.outlived ? ", hold outlived the fault" : ", hold ended within the fault"));
  }
  for (const Op& op : input.history) {
    if (op.process != kNemesis || op.op != "fault-miss") continue;
    ++report.faultMisses;
    if (missed.empty()) missed = "a cycle whose fault never struck: " + op.value;
  }
  const std::string counts = std::to_string(report.faultsOnHolders) + " of " + std::to_string(report.faults) +
                             " faults hit as meant (" + std::to_string(report.faultsKeyTaken) + " with the held key taken), " +
                             std::to_string(report.faultMisses) + " missed" + (missed.empty() ? "" : " (first: " + missed + ")");
  if (input.faults.holderHit && report.faultsOnHolders < input.cycles) {
    fail(report.checks[8], (report.faultsOnHolders == 0 ? "vacuous: " : "") + counts + "; " +
                               std::to_string(input.cycles) + " were to hit");
  } else {
    report.checks[8].reason = counts;
  }
}

// Check 10.
void checkFairness(const CheckerInput& input, Report& report) {
  CheckResult& check = report.checks[9];
  if (!input.fair) {
    leaveOut(check, "not a fair lock: no queue to keep in order");
    return;
  }
  if (!input.serverRecord) {
    leaveOut(check, "fair lock; no server record to replay its queue from");
    return;
  }
  const FairOrderResult fair = checkFairOrder(input.history);
  report.fairGrants = fair.grants;
  report.fairViolations = fair.violations;
  const std::string counts = std::to_string(fair.grants) + " grants in the server's record";
  if (fair.grants == 0) {
    fail(check, "vacuous: no grant in the server's record (observer.history)");
  } else if (fair.violations > 0) {
    fail(check, std::to_string(fair.violations) + " violations in " + counts + "; first: " + fair.first);
  } else {
    check.reason = counts + ", all in queue order, none to a waiter that had left";
  }
}

// Check 11.
void checkServerWrites(const CheckerInput& input, Report& report) {
  CheckResult& check = report.checks[10];
  const ServerWritesResult writes = dlock::nemesis::checkServerWrites(input.history);
  const LateWritesResult late = checkLateWrites(input.history);
  report.serverWritesJudged = writes.judged;
  report.serverWriteViolations = writes.violations;
  report.orphanGrants = writes.orphanGrants;
  report.orphanGrantViolations = writes.orphanViolations;
  report.orphanGrantMaxMs = static_cast<double>(writes.orphanMaxUs) / 1e3;
  const std::string counts = std::to_string(writes.judged) +
                             " deletes, sets and extends of a known key in the server's record; " +
                             std::to_string(writes.orphanGrants) + " orphan grants, kept at most " +
                             ms(report.orphanGrantMaxMs) + " ms, none past the lease it was granted with";
  if (writes.violations > 0) {
    fail(check, std::to_string(writes.violations) + " deleted, overwrote or extended another holder's live key, of " +
                    counts + "; first: " + writes.first);
  } else if (writes.orphanViolations > 0) {
    fail(check, std::to_string(writes.orphanViolations) + " orphan grants kept past the lease they were granted with, of " + counts +
                    "; first: " + writes.firstOrphan);
  } else if (late.late > 0) {
    fail(check, std::to_string(late.late) + " of " + std::to_string(late.bounded) +
                    " writes by calls with a deadline came from a call the server ran after it; first: " + late.first);
  } else if (writes.releasesKept > 0) {
    fail(check, std::to_string(writes.releasesKept) + " of " + std::to_string(writes.releasesJudged) +
                    " releases returned ok while the server still held the key for their owner, of " + counts +
                    "; first: " + writes.firstKept);
  } else if (!input.serverRecord) {
    leaveOut(check, "no server record on this topology");
  } else if (writes.judged == 0) {
    fail(check, "vacuous: " + counts);
  } else {
    check.reason = counts + ", each by its holder or after its expiry; " + std::to_string(writes.releasesJudged) +
                   " releases that returned ok, each with the key no longer its owner's; " +
                   std::to_string(late.bounded) + " writes by calls with a deadline, each run by it";
  }
}

// The holds whose fencing tokens are their own (check 3): a reader's is the last writer's.
std::vector<Hold> fencedHolds(const CheckerInput& input, const std::vector<Hold>& holds) {
  if (input.primitive != "rw") return holds;
  std::set<std::pair<std::string, std::string>> readers;
  for (const Op& op : input.history) {
    if (op.op == "mode" && op.value.rfind("read", 0) == 0) readers.emplace(op.key, op.message);
  }
  std::vector<Hold> own;
  for (const Hold& hold : holds) {
    if (readers.count({hold.key, hold.ownerToken}) == 0) own.push_back(hold);
  }
  return own;
}

// Checks 7, 8, 10 and 11 of a read-write or semaphore run (SharedChecks.h).
void checkSharedHolds(const CheckerInput& input, const std::vector<Hold>& holds, Report& report) {
  const SharedSections sections = replaySections(input, holds);
  report.sharedEnters = sections.entersReplayed;
  report.sharedPeak = sections.peakPermits;
  report.lostTold = sections.lostTold;
  report.lostUntold = sections.lostUntold;
  report.lostHolderKilled = sections.lostHolderKilled;
  report.overlapsWhileValid = sections.overlaps;
  report.vouchedPastEvidence = sections.enteredPastEvidence + sections.readsPastFence;
  report.exclusionViolations = sections.violations();
  const std::string lost = std::to_string(sections.lostTold) + " lost holds told, " + std::to_string(sections.lostUntold) +
                           " untold, " + std::to_string(sections.lostHolderKilled) + " with the holder killed first";
  if (sections.lostUntold > 0) {
    fail(report.checks[6], lost + "; first: " + sections.firstUntold);
  } else {
    report.checks[6].reason = lost;
  }
  const std::string replayed =
      std::to_string(sections.entersReplayed) + " sections replayed from the store's act log, at most " +
      std::to_string(sections.peakPermits) + (input.primitive == "sem" ? " permits (capacity " + std::to_string(input.capacity) +
                                                                             " at the start)"
                                                                       : std::string(" readers")) +
      " valid inside at once; " + std::to_string(sections.overlaps) + " overlaps, " +
      std::to_string(sections.enteredPastEvidence) + " acts past the evidence, " + std::to_string(sections.readsPastFence) +
      " reads past the fence";
  if (sections.violations() > 0) {
    fail(report.checks[7], replayed + "; first: " + sections.first);
  } else if (sections.entersReplayed == 0) {
    fail(report.checks[7], "vacuous: no section in the store's act log");
  } else {
    report.checks[7].reason = replayed;
  }
  const SharedOrder order = checkSharedOrder(input, holds);
  report.checks[9].name = input.primitive == "rw" ? "writer preference" : "hand-offs";
  report.orderJudged = order.judged;
  report.orderViolations = order.violations;
  const std::string counted =
      input.primitive == "rw"
          ? std::to_string(order.judged) + " reads taken at once, " + std::to_string(order.violations) +
                " past a waiting writer"
          : std::to_string(order.judged) + " acquisitions that queued and " + std::to_string(order.samples) +
                " samples of the server's queue with a head that fit; " + std::to_string(order.violations) +
                " self-admitted or unadmitted with no lapse to explain it";
  if (order.failed) {
    fail(report.checks[9], counted + "; first: " + order.first);
  } else {
    report.checks[9].reason = counted;
  }
  leaveOut(report.checks[10],
           "the server's record holds no read-write or semaphore key (their holds are replayed by checks 7 and 8)");
}

}  // namespace

bool isFenceCounter(std::string_view redisKey, std::string_view prefix) {
  if (redisKey.substr(0, prefix.size()) != prefix) return false;
  const std::string_view rest = redisKey.substr(prefix.size());
  constexpr std::string_view kPlainEnd = "}:fence";
  if (rest.size() > kPlainEnd.size() && rest.front() == '{' &&
      rest.substr(rest.size() - kPlainEnd.size()) == kPlainEnd) {
    const std::string_view key = rest.substr(1, rest.size() - 1 - kPlainEnd.size());
    if (detail::KeyNames(prefix, key, false).fence() == redisKey) return true;
  }
  // The cluster's form for a key starting with '}': `#{<16 hex>}:fence:<key>`.
  constexpr std::string_view kShardedHead = "#{0123456789abcdef}:fence:";
  if (rest.size() > kShardedHead.size() && rest.substr(0, 2) == "#{") {
    const std::string_view key = rest.substr(kShardedHead.size());
    if (detail::KeyNames(prefix, key, true).fence() == redisKey) return true;
  }
  return false;
}

bool isTypedError(std::string_view errorType) {
  static const std::set<std::string_view> kTyped = {"LockError",    "ConnectionError",      "BackendError",
                                                    "NotOwnerError", "LockLostError",       "InvalidArgumentError",
                                                    "ConfigError",  "StoreError"};
  return kTyped.count(errorType) > 0;
}

namespace {

// Check 12.
void checkCancelsAnswered(const CheckerInput& input, const std::vector<FaultWindow>& windows, Report& report) {
  CheckResult& check = report.checks[11];
  const CancelsResult cancels = checkCancels(input.history, windows);
  report.cancelsJudged = cancels.judged;
  report.cancelsSlow = cancels.slow;
  report.cancelMaxMs = cancels.maxMs;
  if (cancels.judged == 0) return leaveOut(check, "no acquire was cancelled");
  check.passed = cancels.slow == 0;
  const std::string counts = std::to_string(cancels.judged) + " cancelled acquires (" +
                             std::to_string(cancels.excused) + " with their process paused meanwhile), the longest " +
                             msText(static_cast<std::int64_t>(cancels.maxMs * 1e6)) + " ms from its cancel to its end";
  check.reason = check.passed ? counts + ", each within " + std::to_string(kCancelBound.count()) + " ms"
                              : std::to_string(cancels.slow) + " ended later than " +
                                    std::to_string(kCancelBound.count()) + " ms after their cancel, first: " +
                                    cancels.first + "; " + counts;
}

}  // namespace

Report check(const CheckerInput& input) {
  Report report;
  report.run = input.run;
  const char* names[] = {"fenced store", "unfenced updates", "fencing tokens",    "recovery",  "typed errors, no crash or hang",
                         "TTLs",         "lost leases told", "exclusion",         "faults hit",        "fair order",
                         "deletes, overwrites, extends, orphan grants", "cancels answered"};
  for (std::size_t i = 0; i < report.checks.size(); ++i) report.checks[i].name = names[i];

  const auto processes = byProcess(input.history);
  const std::vector<Hold> holds = extractHolds(input.history);
  for (const Op& op : input.history) {
    if (op.op == "acquire" && op.kind == Kind::Ok) ++report.acquisitionsOk;
    if (op.op == "acquire" && op.kind == Kind::Fail) ++(op.errorType.empty() ? report.acquireTimeouts : report.acquireFailures);
    if (op.op == "fenced-write" && op.kind == Kind::Ok) ++(op.value == "accepted" ? report.fencedAccepted : report.fencedRejected);
    if (op.process == kServer && op.op == "server-set") ++report.serverSets;
  }

  checkFencedStore(input, holds, report);
  checkFencingOrder(input, fencedHolds(input, holds), report);
  const std::vector<FaultWindow> windows = faultWindows(input.history);
  checkRecovery(input, processes, windows, report);
  checkErrorsAndExits(input, processes, report);
  checkTtls(input, report);
  checkCancelsAnswered(input, windows, report);
  std::vector<ExcusedOverlap> excused;
  if (input.primitive == "elect") {
    checkElectionRun(input, report);
    checkFaultsOnHolders(input, report);
    return report;
  }
  if (input.primitive == "cond") {
    checkConditionRun(input, report);
    checkFaultsOnHolders(input, report);
    checkServerWrites(input, report);  // the condition's key is the exclusive lock's
    return report;
  }
  if (input.primitive != "lock") {
    checkSharedHolds(input, holds, report);
    countLostUpdates(input, holds, windows, excused, report);
    checkFaultsOnHolders(input, report);
    return report;
  }
  checkLostLeases(input, holds, windows, excused, report);
  countLostUpdates(input, holds, windows, excused, report);
  checkFaultsOnHolders(input, report);
  checkFairness(input, report);
  checkServerWrites(input, report);
  return report;
}

bool Report::failed() const {
  for (std::size_t i = 0; i < checks.size(); ++i) {
    if (!checks[i].passed) return true;
  }
  return false;
}

std::string Report::failedChecks() const {
  std::string out;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    if (checks[i].passed) continue;
    if (!out.empty()) out += ",";
    out += std::to_string(i + 1);
  }
  return out;
}

std::string Report::summary() const {
  std::ostringstream out;
  out << "run: topology " << run.topology << ", scenario " << run.scenario << ", seed " << run.seed << "\n"
      << "acquisitions: " << acquisitionsOk << " ok, " << acquireTimeouts << " timeouts, " << acquireFailures
      << " failures\n"
      << "fenced writes: " << fencedAccepted << " accepted, " << fencedRejected << " rejected\n"
      << "unfenced lost updates: " << unfencedLostUpdates << ", counted beyond the writes: " << unfencedSurplus << "\n"
      << "fence regressions: " << fenceRegressions << "\n"
      << "faults: " << faults << ", " << faultsOnHolders << " hit as meant, " << faultsKeyTaken
      << " with the held key taken, " << faultMisses << " missed\n"
      << "lost leases: " << lostTold << " told, " << lostUntold << " untold, " << lostHolderKilled
      << " holder killed first, " << lostExpiredFirst << " ended for the holder first\n"
      << "losses while the holder's evidence was valid: " << overlapsWhileValid << " (" << overlapsExcused
      << " excused by a fault with the named cause); vouched past the evidence: " << vouchedPastEvidence
      << "; exclusion violations: " << exclusionViolations << "; seen first in the server's record: " << lossesSeenByServer << " (of " << serverSets
      << " SETs it recorded); holds refused by the store: " << storeRefusedHolds << "\n"
      << "recovery: " << recoveryMs.size() << " recovered, p50 " << ms(recoveryP50Ms) << " ms, max "
      << ms(recoveryMaxMs) << " ms, " << recoveryViolations << " violations\n"
      << "errors: " << joinCounts(errorsByType, ", ") << "\n";
  for (std::size_t i = 0; i < checks.size(); ++i) {
    out << "check " << i + 1 << " " << checks[i].name << ": "
        << (!checks[i].passed ? "FAIL" : checks[i].judged ? "pass" : "left out") << " — " << checks[i].reason << "\n";
  }
  out << "verdict: " << (failed() ? "FAIL" : "PASS");
  std::string leftOut;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    if (checks[i].judged || !checks[i].passed) continue;
    leftOut += (leftOut.empty() ? "" : ", ") + std::to_string(i + 1);
  }
  if (!leftOut.empty()) out << " (left out of the verdict, not judged here: checks " << leftOut << ")";
  out << "\n";
  return out.str();
}

std::string Report::markdownHeader() {
  return "| topology | scenario | seed | faults hit/faults (key taken), missed | acquisitions ok/timeout/fail "
         "| fenced accepted/rejected | unfenced lost updates | fence regressions | lost told/untold/killed/ended first "
         "| exclusion violations | recovery p50/max ms | errors by type | verdict |\n"
         "|---|---|---|---|---|---|---|---|---|---|---|---|---|";
}

std::string Report::markdownRow() const {
  std::ostringstream out;
  out << "| " << run.topology << " | " << run.scenario << " | " << run.seed << " | " << faultsOnHolders << "/" << faults
      << " (" << faultsKeyTaken << "), " << faultMisses << " | " << acquisitionsOk << "/"
      << acquireTimeouts << "/" << acquireFailures << " | " << fencedAccepted << "/" << fencedRejected << " | "
      << unfencedLostUpdates << " | " << fenceRegressions << " | " << lostTold << "/" << lostUntold << "/"
      << lostHolderKilled << "/" << lostExpiredFirst << " | " << exclusionViolations << " | "
      << ms(recoveryP50Ms) << "/" << ms(recoveryMaxMs) << " | " << joinCounts(errorsByType, ", ") << " | "
      << (failed() ? "FAIL (" + failedChecks() + ")" : std::string("PASS")) << " |";
  return out.str();
}

std::string Report::json() const {
  std::ostringstream out;
  const auto counts = [](const std::map<std::string, long long>& map) {
    std::string text = "{";
    for (const auto& [name, count] : map) {
      if (text.size() > 1) text += ", ";
      text += jsonString(name) + ": " + std::to_string(count);
    }
    return text + "}";
  };
  out << "{\n  \"topology\": " << jsonString(run.topology) << ",\n  \"scenario\": " << jsonString(run.scenario)
      << ",\n  \"seed\": " << run.seed << ",\n  \"acquisitions\": {\"ok\": " << acquisitionsOk
      << ", \"timeouts\": " << acquireTimeouts << ", \"failures\": " << acquireFailures << "},\n"
      << "  \"fenced\": {\"accepted\": " << fencedAccepted << ", \"rejected\": " << fencedRejected
      << ", \"storeViolations\": " << fencedStoreViolations << "},\n"
      << "  \"unfencedLostUpdates\": " << unfencedLostUpdates << ",\n  \"unfencedSurplus\": " << unfencedSurplus
      << ",\n  \"unfencedLostByKey\": " << counts(unfencedLostByKey)
      << ",\n  \"fenceRegressions\": " << fenceRegressions << ",\n  \"lostLeases\": {\"told\": " << lostTold
      << ", \"untold\": " << lostUntold << ", \"holderKilled\": " << lostHolderKilled
      << ", \"endedFirst\": " << lostExpiredFirst << "},\n  \"exclusionViolations\": " << exclusionViolations
      << ",\n  \"storeRefusedHolds\": " << storeRefusedHolds << ",\n  \"serverSets\": " << serverSets
      << ",\n  \"lossesSeenByServer\": " << lossesSeenByServer << ",\n  \"serverWrites\": {\"judged\": "
      << serverWritesJudged << ", \"violations\": " << serverWriteViolations << "}" << ",\n  \"faults\": {\"total\": " << faults
      << ", \"onHolders\": " << faultsOnHolders << ", \"keyTaken\": " << faultsKeyTaken
      << ", \"missed\": " << faultMisses << "},\n"
      << "  \"recovery\": {\"recovered\": " << recoveryMs.size() << ", \"p50Ms\": " << ms(recoveryP50Ms)
      << ", \"maxMs\": " << ms(recoveryMaxMs) << ", \"violations\": " << recoveryViolations
      << ", \"unobserved\": " << recoveryUnobserved << ", \"interrupted\": " << recoveryInterrupted << "},\n"
      << "  \"errorsByType\": " << counts(errorsByType) << ",\n  \"crashes\": " << crashes << ",\n  \"hangs\": " << hangs
      << ",\n  \"keysWithoutTtl\": " << keysWithoutTtl << ",\n  \"cancels\": {\"judged\": " << cancelsJudged
      << ", \"slow\": " << cancelsSlow << ", \"maxMs\": " << ms(cancelMaxMs) << "},\n  \"checks\": [\n";
  for (std::size_t i = 0; i < checks.size(); ++i) {
    out << "    {\"number\": " << i + 1 << ", \"name\": " << jsonString(checks[i].name)
        << ", \"passed\": " << (checks[i].passed ? "true" : "false")
        << ", \"judged\": " << (checks[i].judged ? "true" : "false") << ", \"reason\": " << jsonString(checks[i].reason)
        << "}" << (i + 1 < checks.size() ? "," : "") << "\n";
  }
  out << "  ],\n  \"failed\": " << (failed() ? "true" : "false") << "\n}\n";
  return out.str();
}

}  // namespace dlock::nemesis
