// SPDX-License-Identifier: Apache-2.0
#include "SharedChecks.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace dlock::nemesis {
namespace {

// A hold with what the shared workload recorded of it (Client.cpp, SharedWorkload).
struct Section {
  const Hold* hold = nullptr;
  bool writer = false;  // rw: a write hold
  std::uint32_t permits = 1;
  std::optional<std::int64_t> enterInvokeNs;
  std::optional<std::int64_t> enterOkNs;
  std::vector<std::pair<std::int64_t, std::uint64_t>> fenceReads;  // completion, the register's token
};

using SectionKey = std::pair<std::string, std::string>;  // key, owner token

// The sections of every hold, by key and owner token. A process has one hold at a time, so its
// enter, exit and read-fence records belong to the acquisition before them.
std::map<SectionKey, Section> sectionsOf(const CheckerInput& input, const std::vector<Hold>& holds) {
  std::map<SectionKey, Section> sections;
  for (const Hold& hold : holds) sections[{hold.key, hold.ownerToken}].hold = &hold;
  for (const auto& [process, ops] : byProcess(input.history)) {
    Section* current = nullptr;
    for (const Op& op : ops) {
      if (op.op == "acquire" && op.kind == Kind::Ok) {
        const auto found = sections.find({op.key, op.value});
        current = found == sections.end() ? nullptr : &found->second;
      } else if (op.op == "mode" && current != nullptr) {
        std::istringstream words(op.value);
        std::string mode;
        words >> mode >> current->permits;
        current->writer = mode == "write";
      } else if (op.op == "enter" && current != nullptr) {
        (op.kind == Kind::Invoke ? current->enterInvokeNs : current->enterOkNs) = op.timeNs;
      } else if (op.op == "read-fence" && op.kind == Kind::Ok && current != nullptr) {
        current->fenceReads.emplace_back(op.timeNs, std::stoull(op.value));
      }
    }
  }
  return sections;
}

std::string ms(std::int64_t ns) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(ns) / 1e6;
  return out.str();
}

std::string describe(const Section& section) {
  return section.hold->process + " (" + (section.writer ? "write" : std::to_string(section.permits) + " permits/read") +
         ", token " + std::to_string(section.hold->token) + ")";
}

bool killedFirst(const CheckerInput& input, const Hold& hold, std::int64_t atNs) {
  for (const ClientExit& exit : input.exits) {
    if (exit.process == hold.process) return exit.killedByNemesis && exit.killedNs && *exit.killedNs < atNs;
  }
  return false;
}

// What a replay has judged so far.
struct Replay {
  const CheckerInput& input;
  SharedSections result;
  std::set<const Hold*> lost;  // each lost hold is judged once, at the first section that came in
};

// A lost hold (another's section came in after its evidence ran out): told before its release
// returned, or not.
void judgeLoss(Replay& replay, const Section& lost, std::int64_t atNs, const std::string& key) {
  const Hold& hold = *lost.hold;
  if (!replay.lost.insert(&hold).second) return;
  const CheckerInput& input = replay.input;
  SharedSections& result = replay.result;
  if (!hold.releaseInvokeNs && killedFirst(input, hold, atNs)) {
    ++result.lostHolderKilled;
    return;
  }
  const bool releasedOk = hold.releaseOutcome == "ok";
  if (hold.toldNs && (!releasedOk || *hold.toldNs < hold.releaseEndNs.value_or(INT64_MAX))) {
    ++result.lostTold;
    return;
  }
  ++result.lostUntold;
  if (result.firstUntold.empty()) {
    result.firstUntold = "key '" + key + "': " + describe(lost) + " lost its hold to another section and was not told";
  }
}

// One enter of `entering` with `open` sections in the store's order.
void judgeEnter(Replay& replay, const std::string& key, const Section& entering, const std::vector<const Section*>& open) {
  const CheckerInput& input = replay.input;
  SharedSections& result = replay.result;
  ++result.entersReplayed;
  const Hold& hold = *entering.hold;
  if (entering.enterInvokeNs && !hold.validAt(*entering.enterInvokeNs)) {
    ++result.enteredPastEvidence;
    if (result.first.empty()) result.first = "key '" + key + "': " + describe(entering) + " entered past its evidence";
    return;
  }
  if (!entering.enterOkNs || !hold.validAt(*entering.enterOkNs)) return;  // its lease ended meanwhile: no claim
  const std::int64_t at = *entering.enterOkNs;
  const bool semaphore = input.primitive == "sem";
  long long validUnits = entering.permits;
  long long allUnits = entering.permits;
  std::vector<const Section*> conflicting;
  for (const Section* other : open) {
    const bool valid = other->hold->validAt(at);
    if (!semaphore && !entering.writer && !other->writer) {  // readers together
      if (valid) ++validUnits;
      continue;
    }
    allUnits += other->permits;
    if (valid) {
      validUnits += other->permits;
      conflicting.push_back(other);
    } else if (!semaphore) {
      judgeLoss(replay, *other, at, key);
    }
  }
  result.peakPermits = std::max(result.peakPermits, validUnits);
  const bool overlap = semaphore ? validUnits > input.capacity : !conflicting.empty();
  if (semaphore && allUnits > input.capacity) {
    for (const Section* other : open) {
      if (!other->hold->validAt(at)) judgeLoss(replay, *other, at, key);
    }
  }
  if (!overlap) return;
  ++result.overlaps;
  if (result.first.empty()) {
    const Section& inside = *conflicting.front();
    result.first = "key '" + key + "': " + describe(entering) + " entered while " +
                   (semaphore ? std::to_string(validUnits - entering.permits) + " permits of capacity " +
                                    std::to_string(input.capacity) + " were held, "
                              : std::string()) +
                   describe(inside) + " was inside with " + ms(*inside.hold->validUntil(at) - at) +
                   " ms of evidence left";
  }
}

}  // namespace

SharedSections replaySections(const CheckerInput& input, const std::vector<Hold>& holds) {
  Replay replay{input, {}, {}};
  SharedSections& result = replay.result;
  std::map<SectionKey, Section> sections = sectionsOf(input, holds);
  for (const auto& [key, shot] : input.store) {
    std::vector<const Section*> open;
    for (const std::string& act : shot.acts) {
      std::istringstream words(act);
      std::string what;
      std::string owner;
      words >> what >> owner;
      const auto found = sections.find({key, owner});
      if (found == sections.end() || found->second.hold == nullptr) continue;
      const Section* section = &found->second;
      if (what == "exit") {
        open.erase(std::remove(open.begin(), open.end(), section), open.end());
        continue;
      }
      judgeEnter(replay, key, *section, open);
      open.push_back(section);
    }
  }
  // A reader that read a token above its fence while its evidence held: a writer came in.
  for (const auto& [id, section] : sections) {
    if (section.hold == nullptr) continue;
    for (const auto& [readNs, token] : section.fenceReads) {
      if (token <= section.hold->token || !section.hold->validAt(readNs)) continue;
      ++result.readsPastFence;
      if (result.first.empty()) {
        result.first = "key '" + id.first + "': reader " + describe(section) + " read token " + std::to_string(token) +
                       " with its evidence valid";
      }
    }
    // The lock vouched (a look that found it held, a write) past the evidence.
    for (const std::int64_t at : section.hold->vouchedNs) {
      if (section.hold->validAt(at)) continue;
      ++result.enteredPastEvidence;
      if (result.first.empty()) result.first = "key '" + id.first + "': " + describe(section) + " vouched past its evidence";
      break;
    }
  }
  return result;
}

namespace {

struct Attempt {
  std::string process;
  std::string owner;
  std::string outcome;  // taken, queued, granted
  std::string mode;
  std::int64_t sentNs = 0;
  std::int64_t doneNs = 0;
  long long validityMs = 0;
};

std::map<std::string, std::vector<Attempt>> attemptsByKey(const std::vector<Op>& history) {
  std::map<std::string, std::vector<Attempt>> byKey;
  for (const Op& op : history) {
    if (op.op == "acquire" && op.kind != Kind::Invoke) {
      // The end of the process's acquisition (its place left, on a timeout or an error).
      Attempt end;
      end.process = op.process;
      end.outcome = "end";
      end.sentNs = end.doneNs = op.timeNs;
      byKey[op.key].push_back(std::move(end));
      continue;
    }
    if (op.op != "attempt") continue;
    Attempt attempt;
    attempt.process = op.process;
    attempt.owner = op.message;
    attempt.doneNs = op.timeNs;
    std::uint32_t position = 0;
    std::istringstream words(op.value);
    words >> attempt.outcome >> attempt.sentNs >> position >> attempt.mode >> attempt.validityMs;
    byKey[op.key].push_back(std::move(attempt));
  }
  for (auto& [key, attempts] : byKey) {
    std::stable_sort(attempts.begin(), attempts.end(), [](const Attempt& a, const Attempt& b) { return a.doneNs < b.doneNs; });
  }
  return byKey;
}

// rw: a read taken past a writer that was waiting (see the header).
void writerPreference(const CheckerInput& input, const std::string& key, const std::vector<Attempt>& attempts,
                      SharedOrder& order) {
  const std::int64_t waiterLeaseNs = input.lease.count() * 1'000'000;
  std::set<std::string> queuedOwners;  // readers that waited in the queue: they may be ahead of a writer
  for (const Attempt& read : attempts) {
    if (read.outcome == "queued") queuedOwners.insert(read.owner);
    if (read.mode != "read" || read.outcome != "taken" || queuedOwners.count(read.owner) > 0) continue;
    ++order.judged;
    for (std::size_t i = 0; i < attempts.size(); ++i) {
      const Attempt& queued = attempts[i];
      if (queued.mode != "write" || queued.outcome != "queued" || queued.doneNs >= read.sentNs) continue;
      if (read.doneNs >= queued.sentNs + waiterLeaseNs) continue;
      // The writer's next outcome after that attempt, or the end of its acquisition: it stopped
      // waiting then (or left).
      std::int64_t waitedUntil = INT64_MAX;
      for (std::size_t j = i + 1; j < attempts.size(); ++j) {
        const Attempt& next = attempts[j];
        if (next.process == queued.process && (next.outcome == "end" || (next.owner == queued.owner && next.outcome != "queued"))) {
          waitedUntil = next.sentNs;
          break;
        }
      }
      if (read.doneNs >= waitedUntil) continue;
      ++order.violations;
      if (order.first.empty()) {
        order.first = "key '" + key + "': " + read.process + " took a read while " + queued.process +
                      "'s writer waited (queued " + ms(read.sentNs - queued.doneNs) + " ms before the read was sent)";
      }
      break;
    }
  }
}

// When a hold or a place of the key may have ended without its release or leave (what a call
// then reclaims), at the earliest and at the latest, from the records:
// - a hold whose evidence ran out before its release was sent: at its evidence's end (its server
//   lease ends no earlier);
// - a place whose owner made no attempt and did not end its acquisition within a lease of a
//   queued attempt (paused, cut off, killed): a lease after that attempt's send (the waiter lease,
//   and the claim of a grant to it, end no earlier) and no later than a lease after it completed;
// - a place that could not be left (`leave-failed`), or permits an attempt whose reply was lost
//   may have taken: a lease after the acquisition's first send, to a lease after the failure.
struct Lapse {
  std::int64_t earliestNs = 0;
  std::int64_t latestNs = 0;
  std::string owner{};  // a lapsed place's: that owner's later attempt is a newcomer's
};

std::vector<Lapse> lapses(const std::string& key, const std::vector<Attempt>& attempts, const std::vector<Hold>& holds,
                          const std::vector<Op>& history, std::int64_t leaseNs) {
  std::vector<Lapse> at;
  for (const Hold& hold : holds) {
    if (hold.key != key || hold.evidence.empty()) continue;
    const std::int64_t end = hold.evidence.back().second;
    if (!hold.releaseInvokeNs || *hold.releaseInvokeNs > end) at.push_back({end, end + leaseNs});
  }
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const Attempt& queued = attempts[i];
    if (queued.outcome != "queued") continue;
    std::int64_t next = INT64_MAX;
    for (std::size_t j = i + 1; j < attempts.size() && next == INT64_MAX; ++j) {
      const Attempt& later = attempts[j];
      if (later.owner == queued.owner) next = later.sentNs;
      if (later.outcome == "end" && later.process == queued.process) next = later.doneNs;
    }
    if (next >= queued.sentNs + leaseNs) at.push_back({queued.sentNs + leaseNs, queued.doneNs + leaseNs, queued.owner});
  }
  std::map<std::string, std::int64_t> invoked;  // by process: the acquisition under way
  for (const Op& op : history) {
    if (op.key != key) continue;
    if (op.op == "acquire" && op.kind == Kind::Invoke) invoked[op.process] = op.timeNs;
    const bool lost = (op.op == "acquire" && op.kind == Kind::Fail && !op.errorType.empty()) || op.op == "leave-failed";
    if (lost && invoked.count(op.process) > 0) at.push_back({invoked[op.process] + leaseNs, op.timeNs + leaseNs});
  }
  return at;
}

// sem: waiters that admitted themselves where no lapse explains it (see the header).
void handOffs(const CheckerInput& input, const std::string& key, const std::vector<Attempt>& attempts,
              const std::vector<Hold>& holds, SharedOrder& order) {
  const std::vector<Op>& history = input.history;
  const std::int64_t leaseNs = input.lease.count() * 1'000'000;
  const std::vector<Lapse> lapsed = lapses(key, attempts, holds, history, leaseNs);
  std::set<std::string> queuedOwners;
  for (const Attempt& attempt : attempts) {
    if (attempt.outcome == "queued") {
      queuedOwners.insert(attempt.owner);
      continue;
    }
    if (queuedOwners.erase(attempt.owner) == 0) continue;  // judged once per acquisition that queued
    ++order.judged;
    const bool wholeLease = attempt.validityMs == 0 || attempt.validityMs == input.lease.count();
    if (attempt.outcome != "taken" || !wholeLease) continue;
    // A lapse whose window the waiter's own call overlaps can be what that call reclaimed; one
    // that ended for certain before the call was sent (its window's latest end) cannot.
    const bool explained = std::any_of(lapsed.begin(), lapsed.end(), [&](const Lapse& lapse) {
      return lapse.earliestNs <= attempt.doneNs && (lapse.latestNs >= attempt.sentNs || lapse.owner == attempt.owner);
    });
    if (explained) continue;
    ++order.violations;
    if (order.first.empty()) {
      order.first = "key '" + key + "': " + attempt.process + " queued, then admitted itself by its own attempt";
    }
  }
  // The server's own queue (StrandWatch.h): a head waiter that fit and was not admitted.
  for (const Op& op : history) {
    if (op.op != "stranded" || op.key != key) continue;
    ++order.samples;
    const std::int64_t seenBy = std::stoll(op.message);
    // A lapse stays unreclaimed until the next call on the key, which may come a waiter lease (two
    // leases) after it: the look-back a sample needs (seed 2 of single-sem-waiter-mixed saw one).
    const bool explained = std::any_of(lapsed.begin(), lapsed.end(), [&](const Lapse& lapse) {
      return lapse.earliestNs <= seenBy && lapse.latestNs >= op.timeNs - 2 * leaseNs;
    });
    if (explained) continue;
    ++order.violations;
    if (order.first.empty()) order.first = "key '" + key + "': the server held a head waiter whose permits fit, unadmitted";
  }
}

}  // namespace

SharedOrder checkSharedOrder(const CheckerInput& input, const std::vector<Hold>& holds) {
  SharedOrder order;
  for (const auto& [key, attempts] : attemptsByKey(input.history)) {
    if (input.primitive == "rw") {
      writerPreference(input, key, attempts, order);
    } else {
      handOffs(input, key, attempts, holds, order);
    }
  }
  order.failed = order.violations > 0;
  return order;
}

}  // namespace dlock::nemesis
