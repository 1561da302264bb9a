// SPDX-License-Identifier: Apache-2.0
#include "SharedChecks.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace dlock::nemesis {
namespace {

// One section of a hold: its mode from the `mode` record before its enter. A hold may enter
// more than once: a read upgraded to a write, a write downgraded to a read, each a section of
// its own from the call's return (Client.cpp).
struct Entry {
  bool writer = false;  // rw: a write section
  std::uint32_t permits = 1;
  std::optional<std::int64_t> enterInvokeNs;
  std::optional<std::int64_t> enterOkNs;
};

// A hold with what the shared workload recorded of it (Client.cpp, SharedWorkload).
struct Section {
  const Hold* hold = nullptr;
  Entry mode;                  // the mode in force as the records are read
  std::vector<Entry> entries;  // in the order of the hold's enters
  std::vector<std::pair<std::int64_t, std::uint64_t>> fenceReads;  // completion, the register's token
};

// An open section in the replay: the hold and the enter it is inside.
struct Open {
  const Section* section = nullptr;
  const Entry* entry = nullptr;
};

using SectionKey = std::pair<std::string, std::string>;  // key, owner token

// The sections of every hold, by key and owner token. A process has one hold at a time, so its
// mode, enter and read-fence records belong to the acquisition before them.
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
        words >> mode >> current->mode.permits;
        current->mode.writer = mode == "write";
      } else if (op.op == "enter" && current != nullptr) {
        if (op.kind == Kind::Invoke) {
          current->entries.push_back(current->mode);
          current->entries.back().enterInvokeNs = op.timeNs;
        } else if (!current->entries.empty()) {
          current->entries.back().enterOkNs = op.timeNs;
        }
      } else if (op.op == "read-fence" && op.kind == Kind::Ok && current != nullptr) {
        current->fenceReads.emplace_back(op.timeNs, std::stoull(op.value));
      }
    }
  }
  return sections;
}

// A resize of a semaphore as a client recorded it: the capacity asked for (its invoke's value),
// stored by the server at a moment between its invoke and its reply; one whose reply never came
// may have been stored at any moment after its invoke (okNs: none).
struct Resize {
  std::int64_t invokeNs = 0;
  std::int64_t okNs = INT64_MAX;
  std::uint32_t capacity = 0;
};

std::map<std::string, std::vector<Resize>> resizesOf(const std::vector<Op>& history) {
  std::map<std::string, std::vector<Resize>> byKey;
  std::map<std::string, std::pair<std::string, std::size_t>> pending;  // by process: key, index
  for (const Op& op : history) {
    if (op.op != "resize") continue;
    if (op.kind == Kind::Invoke) {
      std::vector<Resize>& resizes = byKey[op.key];
      resizes.push_back({op.timeNs, INT64_MAX, static_cast<std::uint32_t>(std::stoul(op.value))});
      pending[op.process] = {op.key, resizes.size() - 1};
    } else if (pending.count(op.process) > 0) {
      const auto& [key, index] = pending[op.process];
      if (op.kind == Kind::Ok) byKey[key][index].okNs = op.timeNs;
      pending.erase(op.process);
    }
  }
  return byKey;
}

// The largest capacity that can have been in force on the server at some moment of [fromNs,
// toNs]: the one the run began with unless a resize was stored for certain before fromNs, and
// every resize that can have been the last stored by then (invoked by toNs, and not followed, for
// certain before fromNs, by another invoked after its reply).
std::uint32_t capacityBound(std::uint32_t initial, const std::vector<Resize>& resizes, std::int64_t fromNs,
                            std::int64_t toNs) {
  std::uint32_t bound = 0;
  bool storedBefore = false;
  for (const Resize& resize : resizes) {
    if (resize.okNs < fromNs) storedBefore = true;
    if (resize.invokeNs > toNs) continue;
    const bool superseded = std::any_of(resizes.begin(), resizes.end(), [&](const Resize& later) {
      return later.invokeNs > resize.okNs && later.okNs < fromNs;
    });
    if (!superseded) bound = std::max(bound, resize.capacity);
  }
  return storedBefore ? bound : std::max(bound, initial);
}

std::string ms(std::int64_t ns) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(ns) / 1e6;
  return out.str();
}

std::string describe(const Section& section, const Entry& entry) {
  return section.hold->process + " (" + (entry.writer ? "write" : std::to_string(entry.permits) + " permits/read") +
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
  std::map<std::string, std::vector<Resize>> resizes;  // sem: by key
};

// A lost hold (another's section came in after its evidence ran out): told before its release
// returned, or not.
void judgeLoss(Replay& replay, const Open& lost, std::int64_t atNs, const std::string& key) {
  const Hold& hold = *lost.section->hold;
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
    result.firstUntold = "key '" + key + "': " + describe(*lost.section, *lost.entry) + " lost its hold to another section and was not told";
  }
}

// One enter of `entering` with `open` sections in the store's order.
void judgeEnter(Replay& replay, const std::string& key, const Open& enter, const std::vector<Open>& open) {
  const CheckerInput& input = replay.input;
  SharedSections& result = replay.result;
  ++result.entersReplayed;
  const Hold& hold = *enter.section->hold;
  const Entry& entering = *enter.entry;
  if (entering.enterInvokeNs && !hold.validAt(*entering.enterInvokeNs)) {
    ++result.enteredPastEvidence;
    if (result.first.empty()) {
      result.first = "key '" + key + "': " + describe(*enter.section, entering) + " entered past its evidence";
    }
    return;
  }
  if (!entering.enterOkNs || !hold.validAt(*entering.enterOkNs)) return;  // its lease ended meanwhile: no claim
  const std::int64_t at = *entering.enterOkNs;
  const bool semaphore = input.primitive == "sem";
  long long validUnits = entering.permits;
  long long allUnits = entering.permits;
  std::vector<Open> conflicting;
  for (const Open& other : open) {
    const bool valid = other.section->hold->validAt(at);
    if (!semaphore && !entering.writer && !other.entry->writer) {  // readers together
      if (valid) ++validUnits;
      continue;
    }
    allUnits += other.entry->permits;
    if (valid) {
      validUnits += other.entry->permits;
      conflicting.push_back(other);
    } else if (!semaphore) {
      judgeLoss(replay, other, at, key);
    }
  }
  result.peakPermits = std::max(result.peakPermits, validUnits);
  // sem: the capacity in force, at most, from the first of these holds' acquires to this enter
  // (each was granted with the others it shares the moment with in use, under the capacity then).
  std::int64_t fromNs = hold.acquireInvokeNs;
  for (const Open& other : conflicting) fromNs = std::min(fromNs, other.section->hold->acquireInvokeNs);
  const long long capacity = capacityBound(input.capacity, replay.resizes[key], fromNs, at);
  const bool overlap = semaphore ? validUnits > capacity : !conflicting.empty();
  if (semaphore && allUnits > capacity) {
    for (const Open& other : open) {
      if (!other.section->hold->validAt(at)) judgeLoss(replay, other, at, key);
    }
  }
  if (!overlap) return;
  ++result.overlaps;
  if (!result.first.empty()) return;
  result.first = "key '" + key + "': " + describe(*enter.section, entering) + " entered while " +
                 (semaphore ? std::to_string(validUnits - entering.permits) + " permits of capacity " +
                                  std::to_string(capacity) + " were held"
                            : std::string());
  if (conflicting.empty()) return;  // sem: its own permits above the capacity in force
  const Open& inside = conflicting.front();
  result.first += (semaphore ? ", " : "") + describe(*inside.section, *inside.entry) + " was inside with " +
                  ms(*inside.section->hold->validUntil(at) - at) + " ms of evidence left";
}

}  // namespace

SharedSections replaySections(const CheckerInput& input, const std::vector<Hold>& holds) {
  Replay replay{input, {}, {}, resizesOf(input.history)};
  SharedSections& result = replay.result;
  std::map<SectionKey, Section> sections = sectionsOf(input, holds);
  for (const auto& [key, shot] : input.store) {
    std::vector<Open> open;
    std::map<const Section*, std::size_t> entered;  // each hold's enters so far, in the store's order
    for (const std::string& act : shot.acts) {
      std::istringstream words(act);
      std::string what;
      std::string owner;
      words >> what >> owner;
      const auto found = sections.find({key, owner});
      if (found == sections.end() || found->second.hold == nullptr) continue;
      const Section* section = &found->second;
      if (what == "exit") {
        open.erase(std::remove_if(open.begin(), open.end(), [&](const Open& o) { return o.section == section; }),
                   open.end());
        continue;
      }
      // An enter the history has no record of (the client died in its script) counts in the mode it had.
      const std::size_t index = entered[section]++;
      const Entry* entry = index < section->entries.size() ? &section->entries[index] : &section->mode;
      judgeEnter(replay, key, Open{section, entry}, open);
      open.push_back(Open{section, entry});
    }
  }
  // A reader that read a token above its fence while its evidence held: a writer came in.
  for (const auto& [id, section] : sections) {
    if (section.hold == nullptr) continue;
    for (const auto& [readNs, token] : section.fenceReads) {
      if (token <= section.hold->token || !section.hold->validAt(readNs)) continue;
      ++result.readsPastFence;
      if (result.first.empty()) {
        result.first = "key '" + id.first + "': reader " + describe(section, section.mode) + " read token " + std::to_string(token) +
                       " with its evidence valid";
      }
    }
    // The lock vouched (a look that found it held, a write) past the evidence.
    for (const std::int64_t at : section.hold->vouchedNs) {
      if (section.hold->validAt(at)) continue;
      ++result.enteredPastEvidence;
      if (result.first.empty()) {
        result.first = "key '" + id.first + "': " + describe(section, section.mode) + " vouched past its evidence";
      }
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
// Each stays unreclaimed until the next call on the key: its latest end reaches to the first
// attempt sent after it.
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
  // A lapse stays on the server until the next call on the key reclaims it: at the latest, the
  // first attempt sent after its window (a waiter's own call, the first after a killed waiter's
  // place ran out, reclaims it and may admit that waiter).
  for (Lapse& lapse : at) {
    std::int64_t next = INT64_MAX;
    for (const Attempt& attempt : attempts) {
      if (attempt.outcome != "end" && attempt.sentNs >= lapse.latestNs) next = std::min(next, attempt.sentNs);
    }
    if (next != INT64_MAX) lapse.latestNs = next;
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
    // Validity 0 is a take in this very call; any other is a hold found already its own (a grant,
    // with the whole lease left when granted in the same server millisecond).
    if (attempt.outcome != "taken" || attempt.validityMs != 0) continue;
    // A lapse whose window the waiter's own call overlaps can be what that call reclaimed; one
    // that ended for certain before the call was sent (its window's latest end) cannot.
    const bool explained = std::any_of(lapsed.begin(), lapsed.end(), [&](const Lapse& lapse) {
      return lapse.earliestNs <= attempt.doneNs && (lapse.latestNs >= attempt.sentNs || lapse.owner == attempt.owner);
    });
    if (explained) continue;
    ++order.violations;
    if (order.first.empty()) {
      // Where it happened, and the lapse nearest it, for a replay to start from.
      std::string nearest = "no lapse on the key";
      std::int64_t best = INT64_MAX;
      for (const Lapse& lapse : lapsed) {
        const std::int64_t gap = std::min(std::llabs(lapse.earliestNs - attempt.sentNs), std::llabs(lapse.latestNs - attempt.sentNs));
        if (gap >= best) continue;
        best = gap;
        nearest = "the nearest lapse [" + std::to_string(lapse.earliestNs / 1'000'000) + ", " +
                  std::to_string(lapse.latestNs / 1'000'000) + "] ms";
      }
      order.first = "key '" + key + "': " + attempt.process + " queued, then admitted itself by its own attempt (sent at " +
                    std::to_string(attempt.sentNs / 1'000'000) + " ms, answered at " +
                    std::to_string(attempt.doneNs / 1'000'000) + " ms, owner " + attempt.owner + "; " + nearest + ")";
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
