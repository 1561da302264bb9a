// SPDX-License-Identifier: Apache-2.0
#include "ConditionChecks.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "FaultHits.h"
#include "Holds.h"

namespace dlock::nemesis {
namespace {

struct Evidence {
  std::string key;
  std::int64_t sendNs = 0;
  std::int64_t untilNs = 0;
};

struct Taking {
  std::string process;
  std::int64_t sendNs = 0;
  std::int64_t replyNs = 0;
};

struct BufferWrite {
  std::string process;
  std::string key;
  std::uint64_t token = 0;
  std::int64_t lookedNs = 0;    // its invoke record, dated from the look that allowed it
  std::int64_t giveUpNs = 0;    // the writer's last acquire or await invoke of the key before it
  bool completed = false;
  std::string what{};           // "put ITEM" or "take ITEM"
};

struct Signal {
  std::string process;
  std::string key;
  std::string name;
  std::int64_t invokeNs = 0;
  std::int64_t completeNs = 0;
  long long moved = 0;
  bool one = false;  // signal(), not signalAll(): owes one of its waiters a move
};

struct Await {
  std::string process;
  std::string key;
  std::string name;
  std::int64_t invokeNs = 0;
  bool joined = false;
  std::optional<std::int64_t> wokenNs{};
  std::string wokenWhy{};  // signalled, timeout, lapsed
  bool undecided = false;  // its leave answered "gone" after its place's evidence ended
};

struct Records {
  std::map<std::string, std::vector<Evidence>> evidence;         // by process
  std::map<std::string, std::vector<Taking>> takings;            // by key, in send order
  std::vector<BufferWrite> writes;
  std::vector<Signal> signals;                                   // answered as the owner's
  std::vector<Await> awaits;
};

void fail(CheckResult& check, const std::string& reason) {
  check.passed = false;
  check.reason = reason;
}

std::string afterSpace(const std::string& text) {
  const auto space = text.find(' ');
  return space == std::string::npos ? std::string() : text.substr(space + 1);
}
std::string beforeSpace(const std::string& text) { return text.substr(0, text.find(' ')); }

void readProcess(const std::string& process, const std::vector<Op>& ops, Records& records) {
  std::map<std::string, std::int64_t> giveUp;  // by key
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::int64_t signalInvoke = -1;  // the open signal's invoke
  std::size_t openWrite = kNone;   // indexes into records
  std::size_t openAwait = kNone;
  for (const Op& op : ops) {
    if (op.op == "lease") {
      records.evidence[process].push_back({op.key, op.timeNs, op.timeNs + std::stoll(op.value) * 1'000'000});
    } else if (op.op == "taken") {
      records.takings[op.key].push_back({process, op.timeNs, std::stoll(op.value)});
    } else if ((op.op == "acquire" || op.op == "await") && op.kind == Kind::Invoke) {
      giveUp[op.key] = op.timeNs;
      if (op.op == "await") {
        openAwait = records.awaits.size();
        records.awaits.push_back({process, op.key, op.value, op.timeNs, false});
      }
    } else if (op.op == "joined" && openAwait != kNone) {
      records.awaits[openAwait].joined = true;
    } else if (op.op == "woken" && openAwait != kNone && !records.awaits[openAwait].wokenNs) {
      records.awaits[openAwait].wokenNs = op.timeNs;
      records.awaits[openAwait].wokenWhy = afterSpace(op.value);
    } else if (op.op == "leave-undecided") {
      // Its leave or renewal found it gone after its place's evidence ended: a move or a lapse,
      // undecided. The last await of this key and condition (a leave retried later on the
      // cleanup lane may come after the next await began).
      for (auto it = records.awaits.rbegin(); it != records.awaits.rend(); ++it) {
        if (it->process != process || it->key != op.key || it->name != op.value) continue;
        it->wokenWhy = "lapsed";
        it->undecided = true;
        break;
      }
    } else if (op.op == "await" && op.kind == Kind::Ok && openAwait != kNone && op.message == "signalled" &&
               !records.awaits[openAwait].undecided) {
      // The public call's own outcome, which the server decided: a local wait that ran out as the
      // signal came (its `woken` says timeout) was signalled all the same.
      records.awaits[openAwait].wokenWhy = "signalled";
    } else if (op.op == "fenced-write" && op.kind == Kind::Invoke) {
      openWrite = records.writes.size();
      records.writes.push_back({process, op.key, op.token, op.timeNs, giveUp[op.key], false});
    } else if (op.op == "fenced-write" && op.kind == Kind::Ok && openWrite != kNone) {
      records.writes[openWrite].completed = true;
      records.writes[openWrite].what = op.message;
      openWrite = kNone;
    } else if (op.op == "signal" && op.kind == Kind::Invoke) {
      signalInvoke = op.timeNs;
    } else if (op.op == "signal" && op.kind == Kind::Ok && signalInvoke >= 0) {
      const std::string answer = afterSpace(op.value);  // "MOVED" or "MOVED one"
      records.signals.push_back({process, op.key, beforeSpace(op.value), signalInvoke, op.timeNs, std::stoll(answer),
                                 afterSpace(answer) == "one"});
      signalInvoke = -1;
    }
  }
}

Records readRecords(const CheckerInput& input) {
  Records records;
  for (const auto& [process, ops] : byProcess(input.history)) readProcess(process, ops, records);
  for (auto& [key, takings] : records.takings) {
    std::sort(takings.begin(), takings.end(), [](const Taking& a, const Taking& b) { return a.sendNs < b.sendNs; });
  }
  std::sort(records.signals.begin(), records.signals.end(),
            [](const Signal& a, const Signal& b) { return a.invokeNs < b.invokeNs; });
  return records;
}

// Check 2: the store's lists of one key.
void judgeBuffer(const std::string& key, const StoreKeySnapshot& shot, std::uint32_t capacity, long long& violations,
                 std::string& first) {
  const auto note = [&](const std::string& story) {
    ++violations;
    if (first.empty()) first = "key '" + key + "': " + story;
  };
  std::multiset<std::string> put(shot.put.begin(), shot.put.end());
  std::set<std::string> taken;
  for (const std::string& item : shot.taken) {
    if (!taken.insert(item).second) note("item " + item + " taken twice");
    const auto found = put.find(item);
    if (found == put.end()) {
      note("item " + item + " taken, never put (or taken more often than put)");
    } else {
      put.erase(found);
    }
  }
  for (const std::string& item : shot.buffer) {
    const auto found = put.find(item);
    if (found == put.end()) {
      note("item " + item + " in the buffer, never put");
    } else {
      put.erase(found);
    }
  }
  if (!put.empty()) note(std::to_string(put.size()) + " items put, neither taken nor in the buffer; first " + *put.begin());
  if (shot.bufferPeak > static_cast<long long>(capacity)) {
    note("the buffer held " + std::to_string(shot.bufferPeak) + " items, over its capacity " + std::to_string(capacity));
  }
}

void checkBuffer(const CheckerInput& input, Report& report) {
  CheckResult& check = report.checks[1];
  long long violations = 0;
  long long puts = 0;
  long long takes = 0;
  long long peak = 0;
  std::string first;
  for (const auto& [key, shot] : input.store) {
    judgeBuffer(key, shot, input.capacity, violations, first);
    puts += static_cast<long long>(shot.put.size());
    takes += static_cast<long long>(shot.taken.size());
    peak = std::max(peak, shot.bufferPeak);
  }
  const std::string counts = std::to_string(puts) + " items put, " + std::to_string(takes) + " taken, at most " +
                             std::to_string(peak) + " in a buffer of " + std::to_string(input.capacity);
  if (violations > 0) {
    fail(check, std::to_string(violations) + " violations (" + counts + "); first: " + first);
  } else if (takes == 0) {
    fail(check, "vacuous: " + counts);
  } else {
    check.reason = counts + "; each item taken once";
  }
}

bool covered(const std::vector<Evidence>& evidence, const BufferWrite& write) {
  return std::any_of(evidence.begin(), evidence.end(), [&](const Evidence& e) {
    return e.key == write.key && e.sendNs >= write.giveUpNs && e.sendNs <= write.lookedNs && write.lookedNs < e.untilNs;
  });
}

void checkHeldWhenActing(const CheckerInput& input, const Records& records, Report& report) {
  CheckResult& check = report.checks[6];
  long long unheld = 0;
  long long refused = 0;
  std::string first;
  static const std::vector<Evidence> kNone;
  for (const BufferWrite& write : records.writes) {
    const auto evidence = records.evidence.find(write.process);
    const std::string who = write.process + " (" + write.what + ", token " + std::to_string(write.token) + ")";
    if (!covered(evidence == records.evidence.end() ? kNone : evidence->second, write)) {
      ++unheld;
      if (first.empty()) first = who + " wrote outside its evidence since it last gave the key up";
    }
    const auto shot = input.store.find(write.key);
    if (!write.completed || shot == input.store.end()) continue;
    const auto& tokens = shot->second.acceptedTokens;
    if (std::find(tokens.begin(), tokens.end(), write.token) == tokens.end()) {
      ++refused;
      if (first.empty()) first = who + " was refused by the store: a later holder had written";
    }
  }
  report.vouchedPastEvidence = unheld;
  report.storeRefusedHolds = refused;
  report.exclusionViolations = unheld + refused;
  const std::string counts = std::to_string(records.writes.size()) + " fenced puts and takes, " + std::to_string(unheld) +
                             " outside the writer's evidence, " + std::to_string(refused) + " refused by the store";
  if (unheld + refused > 0) {
    fail(check, counts + "; first: " + first);
  } else if (records.writes.empty()) {
    fail(check, "vacuous: " + counts);
  } else {
    check.reason = counts;
  }
}

void checkSignalOwners(const Records& records, Report& report) {
  CheckResult& check = report.checks[7];
  long long violations = 0;
  std::string first;
  for (const Signal& signal : records.signals) {
    const auto found = records.takings.find(signal.key);
    if (found == records.takings.end()) continue;
    std::optional<std::int64_t> ownReply;  // the signaller's own last acquisition before it
    for (const Taking& taking : found->second) {
      if (taking.process == signal.process && taking.sendNs < signal.invokeNs) ownReply = taking.replyNs;
    }
    if (!ownReply) continue;
    for (const Taking& taking : found->second) {
      if (taking.process != signal.process && taking.sendNs > *ownReply && taking.replyNs < signal.invokeNs) {
        ++violations;
        if (first.empty()) {
          first = signal.process + "'s signal of '" + signal.key + "' " + signal.name + " was answered as the owner's after " +
                  taking.process + " took the key";
        }
        break;
      }
    }
  }
  const std::string counts = std::to_string(records.signals.size()) + " signals answered as the owner's, " +
                             std::to_string(violations) + " after another process took the key";
  if (violations > 0) {
    fail(check, counts + "; first: " + first);
  } else if (records.signals.empty()) {
    fail(check, "vacuous: " + counts);
  } else {
    check.reason = counts;
  }
}

bool aimedAt(const std::vector<FaultWindow>& windows, const std::string& process, std::int64_t fromNs, std::int64_t toNs) {
  return std::any_of(windows.begin(), windows.end(), [&](const FaultWindow& window) {
    return window.target == process && window.startNs <= toNs && window.endNs.value_or(INT64_MAX) >= fromNs;
  });
}

void checkLostSignals(const CheckerInput& input, const Records& records, Report& report) {
  CheckResult& check = report.checks[9];
  const std::vector<FaultWindow> windows = faultWindows(input.history);
  std::map<std::size_t, std::vector<const Await*>> owed;  // by signal: the waiters it had to move
  long long judged = 0;
  for (const Await& await : records.awaits) {
    if (!await.joined || await.wokenWhy == "lapsed") continue;
    const auto next = std::find_if(records.signals.begin(), records.signals.end(), [&](const Signal& signal) {
      return signal.key == await.key && signal.name == await.name && signal.process != await.process &&
             signal.invokeNs > await.invokeNs;
    });
    if (next == records.signals.end()) continue;
    if (await.wokenNs && *await.wokenNs < next->completeNs && await.wokenWhy != "signalled") continue;
    if (aimedAt(windows, await.process, await.invokeNs, next->completeNs)) continue;
    ++judged;
    owed[static_cast<std::size_t>(next - records.signals.begin())].push_back(&await);
  }
  // Judged by waiter, not only by count: each waiter the signal owed must have been moved (its
  // await ended "signalled"); a signal that moved as many others as it owed still lost these.
  long long lost = 0;
  std::string first;
  for (const auto& [index, waiters] : owed) {
    const Signal& signal = records.signals[index];
    const Await* unmoved = nullptr;
    long long notMoved = 0;
    for (const Await* await : waiters) {
      if (await->wokenWhy.empty() || await->wokenWhy == "signalled") continue;
      ++notMoved;
      if (unmoved == nullptr) unmoved = await;
    }
    const auto owedCount = static_cast<long long>(waiters.size());
    // signalAll() owes every waiter before it a move, judged by waiter. signal() owes one move, by
    // count: the server moves its oldest place, which may be a waiter the fault left on the
    // condition (killed or paused, its place not yet lapsed) and so not among those owed.
    const long long owes = signal.one ? std::min(owedCount, 1LL) : owedCount;
    const long long unmovedOwed = signal.one ? 0 : notMoved;
    const long long missing = std::max(owes - signal.moved, unmovedOwed);
    if (missing <= 0) continue;
    lost += missing;
    if (first.empty()) {
      first = signal.process + "'s signal of '" + signal.key + "' " + signal.name + " moved " + std::to_string(signal.moved) +
              " of the " + std::to_string(owedCount) + " waiters whose await came before it" +
              (unmoved == nullptr ? std::string()
                                  : "; " + unmoved->process + "'s await was not among them (it ended: " +
                                        unmoved->wokenWhy + ")");
    }
  }
  const std::string counts = std::to_string(judged) + " awaits judged against the first signal after them, " +
                             std::to_string(lost) + " waiters it did not move";
  if (lost > 0) {
    fail(check, counts + "; first: " + first);
  } else if (judged == 0 && input.signalsOptional) {
    check.judged = false;  // its fault meets the await itself, which check 7 judges
    check.reason = "not judged: no await met a signal after it in this run (" + counts + ")";
  } else if (judged == 0) {
    fail(check, "vacuous: " + counts);
  } else {
    check.reason = counts;
  }
}

}  // namespace

void checkConditionRun(const CheckerInput& input, Report& report) {
  report.checks[1].name = "buffer: each item once, within capacity";
  report.checks[6].name = "held when acting";
  report.checks[7].name = "signals by the owner";
  report.checks[9].name = "no lost signal";
  const Records records = readRecords(input);
  checkBuffer(input, report);
  checkHeldWhenActing(input, records, report);
  checkSignalOwners(records, report);
  checkLostSignals(input, records, report);
}

}  // namespace dlock::nemesis
