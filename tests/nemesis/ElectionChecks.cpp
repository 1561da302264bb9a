// SPDX-License-Identifier: Apache-2.0
#include "ElectionChecks.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "Holds.h"

namespace dlock::nemesis {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

// One term a campaign returned, as its holder saw it.
struct Term {
  std::string process;
  std::uint64_t number = 0;
  std::int64_t startNs = 0;      // the campaign's return
  std::int64_t firstValidNs = 0;  // validUntil() then
  std::int64_t lastValidNs = 0;   // the latest validUntil() read while it led
  std::int64_t resignNs = kNever;  // its resign's invoke
  std::set<std::string> values;    // the campaign's and each proclaim's
  [[nodiscard]] std::int64_t endNs() const { return std::min(lastValidNs, resignNs); }
};

struct LeaderReport {
  std::int64_t timeNs = 0;
  std::uint64_t term = 0;
  bool leader = false;
  std::uint64_t skipped = 0;
  std::string value;
};

// One observe() call's watch.
struct Watch {
  std::string process;
  std::string id;
  std::int64_t startNs = 0;  // observe() called
  std::int64_t stopNs = kNever;
  bool subscribed = false;  // observe() returned
  std::vector<LeaderReport> reports;
};

struct ElectionRecords {
  std::map<std::uint64_t, Term> terms;  // by number
  std::vector<std::string> duplicates;  // a term two campaigns returned
  std::set<std::uint64_t> realTerms;    // confirmed holds (lease evidence) and returned terms
  std::vector<Watch> watches;
};

void fail(CheckResult& check, const std::string& reason) {
  check.passed = false;
  check.reason = reason;
}

void leaveOut(CheckResult& check, const std::string& why) {
  check.judged = false;
  check.reason = "not judged: " + why;
}

std::string ms(std::int64_t ns) {
  std::ostringstream out;
  out.precision(1);
  out << std::fixed << static_cast<double>(ns) / 1e6;
  return out.str();
}

// "WATCH leader|none SKIPPED" of an `observed` record.
std::optional<LeaderReport> parseReport(const Op& op, std::string& watch) {
  std::istringstream in(op.value);
  std::string kind;
  LeaderReport report;
  if (!(in >> watch >> kind >> report.skipped)) return std::nullopt;
  report.timeNs = op.timeNs;
  report.term = op.token;
  report.leader = kind == "leader";
  report.value = op.message;
  return report;
}

void readProcess(const std::string& process, const std::vector<Op>& ops, ElectionRecords& records) {
  std::map<std::string, std::size_t> watches;  // by id, into records.watches
  for (const Op& op : ops) {
    if (op.op == "lease" && op.token != 0) records.realTerms.insert(op.token);
    if (op.op == "term") {
      auto [it, added] = records.terms.try_emplace(op.token);
      if (!added && it->second.process != process) {
        records.duplicates.push_back("term " + std::to_string(op.token) + " returned to " + it->second.process +
                                     " and " + process);
        continue;
      }
      Term& term = it->second;
      term.process = process;
      term.number = op.token;
      term.startNs = op.timeNs;
      term.firstValidNs = term.lastValidNs = std::stoll(op.value);
      term.values.insert(op.message);
      records.realTerms.insert(op.token);
    } else if (op.op == "term-valid" || (op.op == "release" && op.kind == Kind::Invoke) ||
               (op.op == "proclaim" && op.kind == Kind::Invoke)) {
      const auto it = records.terms.find(op.token);
      if (it == records.terms.end() || it->second.process != process) continue;
      Term& term = it->second;
      if (op.op == "term-valid") term.lastValidNs = std::max<std::int64_t>(term.lastValidNs, std::stoll(op.value));
      if (op.op == "release") term.resignNs = std::min(term.resignNs, op.timeNs);
      if (op.op == "proclaim") term.values.insert(op.value);
    } else if (op.op == "observe" && op.kind == Kind::Invoke) {
      // Its first report may come before observe() returns (the handler's thread): a watch
      // counts from the call, and only once the call returned (ok).
      watches[op.value] = records.watches.size();
      records.watches.push_back(Watch{process, op.value, op.timeNs, kNever, false, {}});
    } else if (op.op == "observe" && op.kind == Kind::Ok) {
      const auto it = watches.find(op.value);
      if (it != watches.end()) records.watches[it->second].subscribed = true;
    } else if (op.op == "observed") {
      std::string id;
      const auto report = parseReport(op, id);
      const auto it = watches.find(id);
      if (report && it != watches.end()) records.watches[it->second].reports.push_back(*report);
    } else if (op.op == "watch-stop") {
      const auto it = watches.find(op.value);
      if (it != watches.end()) records.watches[it->second].stopNs = op.timeNs;
    }
  }
}

ElectionRecords readRecords(const std::vector<Op>& history) {
  ElectionRecords records;
  for (const auto& [process, ops] : byProcess(history)) {
    if (process == "nemesis" || process == "server") continue;
    readProcess(process, ops, records);
  }
  return records;
}

// Check 8: no two clients' local terms at once.
void checkOneLeader(const ElectionRecords& records, Report& report) {
  CheckResult& check = report.checks[7];
  std::vector<const Term*> terms;
  for (const auto& [number, term] : records.terms) terms.push_back(&term);
  std::sort(terms.begin(), terms.end(), [](const Term* a, const Term* b) { return a->startNs < b->startNs; });
  std::string first = records.duplicates.empty() ? std::string() : records.duplicates.front();
  long long violations = static_cast<long long>(records.duplicates.size());
  for (const Term* term : terms) {
    if (term->firstValidNs > term->startNs) continue;
    ++violations;
    if (first.empty()) {
      first = term->process + "'s campaign returned term " + std::to_string(term->number) + " " +
              ms(term->startNs - term->firstValidNs) + " ms past its deadline";
    }
  }
  for (std::size_t i = 0; i < terms.size(); ++i) {
    for (std::size_t j = i + 1; j < terms.size() && terms[j]->startNs < terms[i]->endNs(); ++j) {
      if (terms[j]->process == terms[i]->process || terms[j]->startNs >= terms[j]->endNs()) continue;
      ++violations;
      if (first.empty()) {
        first = terms[j]->process + " led term " + std::to_string(terms[j]->number) + " while " + terms[i]->process +
                "'s term " + std::to_string(terms[i]->number) + " had " + ms(terms[i]->endNs() - terms[j]->startNs) +
                " ms left";
      }
    }
  }
  report.exclusionViolations = violations;
  if (violations > 0) {
    fail(check, std::to_string(violations) + " violations; first: " + first);
  } else if (terms.empty()) {
    fail(check, "vacuous: no campaign returned a term");
  } else {
    check.reason = std::to_string(terms.size()) + " terms, none overlapping another client's (from the campaign's "
                   "return to the last local deadline read, or the resign)";
  }
}

// Rules 1-3 of check 10 on one watch: never back, real terms and values, no silent gap.
void checkReports(const Watch& watch, const ElectionRecords& records, const std::vector<std::uint64_t>& returned,
                  long long& violations, std::string& first) {
  const auto violation = [&](const std::string& what) {
    ++violations;
    if (first.empty()) first = watch.process + " watch " + watch.id + ": " + what;
  };
  std::optional<std::uint64_t> previous;
  std::optional<std::uint64_t> lastLeader;
  std::uint64_t skippedSince = 0;
  for (const LeaderReport& report : watch.reports) {
    if (previous && report.term < *previous) {
      violation("reported term " + std::to_string(report.term) + " after term " + std::to_string(*previous));
    }
    previous = std::max(previous.value_or(0), report.term);
    skippedSince += report.skipped;
    if (!report.leader) continue;
    if (records.realTerms.count(report.term) == 0) {
      violation("reported term " + std::to_string(report.term) + ", which no client held");
    } else if (const auto term = records.terms.find(report.term);
               term != records.terms.end() && term->second.values.count(report.value) == 0) {
      violation("reported term " + std::to_string(report.term) + " with value '" + report.value +
                "', which that term never proclaimed");
    }
    if (lastLeader && report.term > *lastLeader) {
      const auto from = std::upper_bound(returned.begin(), returned.end(), *lastLeader);
      const auto to = std::lower_bound(returned.begin(), returned.end(), report.term);
      const auto between = static_cast<std::uint64_t>(std::max<std::ptrdiff_t>(0, to - from));
      if (between > skippedSince) {
        violation("went from term " + std::to_string(*lastLeader) + " to " + std::to_string(report.term) + " past " +
                  std::to_string(between) + " terms campaigns returned, counting " + std::to_string(skippedSince) +
                  " skipped");
      }
    }
    if (!lastLeader || report.term > *lastLeader) {
      lastLeader = report.term;
      skippedSince = 0;
    }
  }
}

// Rule 4 of check 10: a leader's watch of its own term ("sN", started as the term began; the term
// lasted until its first report or the client's bound) reported that term before its resign,
// unless the term had ended for its holder first. Returns 1 when judged.
long long checkOwnTermWatch(const Watch& watch, const ElectionRecords& records, long long& violations,
                            std::string& first) {
  if (watch.id.empty() || watch.id.front() != 's') return 0;
  for (const auto& entry : records.terms) {
    const std::uint64_t number = entry.first;
    const Term& term = entry.second;
    if (term.process != watch.process || term.startNs > watch.startNs || term.resignNs <= watch.startNs) continue;
    if (term.resignNs == kNever || term.lastValidNs <= term.resignNs) return 0;  // ended first, or never resigned
    const bool seen = std::any_of(watch.reports.begin(), watch.reports.end(), [&](const LeaderReport& report) {
      return report.leader && report.term == number && report.timeNs < term.resignNs;
    });
    const std::int64_t boundNs = std::chrono::duration_cast<std::chrono::nanoseconds>(kOwnWatchBound).count();
    if (!seen && watch.stopNs - watch.startNs < boundNs) return 0;  // stopped before its bound
    if (!seen) {
      ++violations;
      if (first.empty()) {
        first = watch.process + " watch " + watch.id + " of its own term " + std::to_string(number) +
                " reported nothing of it in the " + ms(term.resignNs - watch.startNs) + " ms before its resign";
      }
    }
    return 1;
  }
  return 0;
}

// Check 10: what the observers reported.
void checkObservers(const ElectionRecords& records, Report& report) {
  CheckResult& check = report.checks[9];
  check.name = "observers";
  std::vector<std::uint64_t> returned;
  for (const auto& [number, term] : records.terms) returned.push_back(number);
  long long violations = 0;
  long long reports = 0;
  long long ownJudged = 0;
  std::string first;
  for (const Watch& watch : records.watches) {
    if (!watch.subscribed) continue;
    reports += static_cast<long long>(watch.reports.size());
    checkReports(watch, records, returned, violations, first);
    ownJudged += checkOwnTermWatch(watch, records, violations, first);
  }
  report.orderJudged = reports;
  report.orderViolations = violations;
  if (violations > 0) {
    fail(check, std::to_string(violations) + " violations; first: " + first);
  } else if (reports == 0) {
    fail(check, "vacuous: no observer reported anything");
  } else {
    check.reason = std::to_string(reports) + " reports of " + std::to_string(records.watches.size()) +
                   " watches: none went back or named a term or value no client had, no silent gap; " +
                   std::to_string(ownJudged) + " leaders' watches of their own terms reported them";
  }
}

}  // namespace

void checkElectionRun(const CheckerInput& input, Report& report) {
  const ElectionRecords records = readRecords(input.history);
  leaveOut(report.checks[1], "an election run has no unfenced counter");
  leaveOut(report.checks[6], "a lost term's notice is judged through the local deadlines of check 8");
  leaveOut(report.checks[10], "the server's record holds no election key");
  report.checks[7].name = "one leader";
  checkOneLeader(records, report);
  checkObservers(records, report);
}

}  // namespace dlock::nemesis
