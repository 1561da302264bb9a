// SPDX-License-Identifier: Apache-2.0
// The election's checks (ElectionChecks.h, and check 1 over its terms) on hand-built runs: each
// rule has a run that must fail it and one that must pass. Times in ms; the election "k".
#include <doctest/doctest.h>

#include <algorithm>

#include "Checker.h"
#include "ElectionChecks.h"

using dlock::nemesis::CheckerInput;
using dlock::nemesis::Kind;
using dlock::nemesis::Op;

namespace {

constexpr std::int64_t kMs = 1'000'000;

void add(CheckerInput& input, const std::string& process, Kind kind, const std::string& op, std::int64_t ms,
         std::uint64_t token = 0, std::string value = "", std::string message = "") {
  Op record;
  record.process = process;
  record.kind = kind;
  record.op = op;
  record.key = "k";
  record.timeNs = ms * kMs;
  record.token = token;
  record.value = std::move(value);
  record.message = std::move(message);
  input.history.push_back(std::move(record));
}

CheckerInput base() {
  CheckerInput input;
  input.primitive = "elect";
  input.serverRecord = false;
  input.store["k"];
  return input;
}

// A campaign of `process` returning term `term` at `startMs` with its deadline at `validMs`,
// its value "vTERM", the evidence of its hold sent 1 ms before.
void campaign(CheckerInput& input, const std::string& process, std::uint64_t term, std::int64_t startMs,
              std::int64_t validMs) {
  const std::string value = "v" + std::to_string(term);
  add(input, process, Kind::Invoke, "acquire", startMs - 2, 0, value);
  add(input, process, Kind::Info, "lease", startMs - 1, term, std::to_string(validMs - startMs + 1), process + "-owner");
  add(input, process, Kind::Ok, "acquire", startMs, term, process + "-owner");
  add(input, process, Kind::Info, "term", startMs, term, std::to_string(validMs * kMs), value);
}

void resign(CheckerInput& input, const std::string& process, std::uint64_t term, std::int64_t ms) {
  add(input, process, Kind::Invoke, "release", ms, term);
  add(input, process, Kind::Ok, "release", ms + 1, term);
}

void watch(CheckerInput& input, const std::string& process, const std::string& id, std::int64_t startMs) {
  add(input, process, Kind::Invoke, "observe", startMs - 1, 0, id);
  add(input, process, Kind::Ok, "observe", startMs, 0, id);
}

void observed(CheckerInput& input, const std::string& process, const std::string& id, std::int64_t ms,
              std::uint64_t term, bool leader, std::uint64_t skipped = 0, std::string value = "") {
  if (leader && value.empty()) value = "v" + std::to_string(term);
  add(input, process, Kind::Info, "observed", ms, term,
      id + (leader ? " leader " : " none ") + std::to_string(skipped), value);
}

// Two terms one after the other, the first resigned; an observer that saw both.
CheckerInput twoTerms() {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);
  resign(input, "c1", 5, 300);
  campaign(input, "c2", 6, 302, 1302);
  resign(input, "c2", 6, 600);
  watch(input, "c3", "1", 5);
  observed(input, "c3", "1", 6, 0, false);
  observed(input, "c3", "1", 11, 5, true);
  observed(input, "c3", "1", 303, 6, true);
  observed(input, "c3", "1", 601, 6, false);
  add(input, "c3", Kind::Info, "watch-stop", 700, 0, "1");
  return input;
}

bool passes(const CheckerInput& input, std::size_t check) { return dlock::nemesis::check(input).checks.at(check - 1).passed; }

}  // namespace

TEST_CASE("election check 8: terms one after another pass") {
  const CheckerInput input = twoTerms();
  CHECK(passes(input, 8));
  CHECK(passes(input, 10));
  const auto report = dlock::nemesis::check(input);
  CHECK_FALSE(report.checks.at(1).judged);   // no unfenced counter
  CHECK_FALSE(report.checks.at(10).judged);  // no server record of election keys
}

TEST_CASE("election check 8: a term begun inside another client's unexpired one fails") {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);  // never resigned: holds until 1010 as far as c1 knows
  campaign(input, "c2", 6, 900, 1900);
  CHECK_FALSE(passes(input, 8));

  CheckerInput renewed = base();  // the first term's deadline moved past the second's start by a renewal
  campaign(renewed, "c1", 5, 10, 800);
  campaign(renewed, "c2", 6, 900, 1900);
  CHECK(passes(renewed, 8));
  add(renewed, "c1", Kind::Info, "term-valid", 400, 5, std::to_string(1200 * kMs));
  CHECK_FALSE(passes(renewed, 8));
}

TEST_CASE("election check 8: a resign ends the term, whatever its answer") {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);
  add(input, "c1", Kind::Invoke, "release", 300, 5);
  add(input, "c1", Kind::Fail, "release", 900, 5);  // in doubt: the holder counts it as not held
  campaign(input, "c2", 6, 302, 1302);
  CHECK(passes(input, 8));
}

TEST_CASE("election check 8: a campaign that returned a term past its deadline fails") {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);
  resign(input, "c1", 5, 300);
  CHECK(passes(input, 8));
  campaign(input, "c2", 6, 500, 499);
  CHECK_FALSE(passes(input, 8));
}

TEST_CASE("election check 8: a run without a term is vacuous") {
  CheckerInput input = base();
  watch(input, "c3", "1", 5);
  observed(input, "c3", "1", 6, 0, false);
  CHECK_FALSE(passes(input, 8));
}

TEST_CASE("election check 1: the fenced store takes only rising terms") {
  CheckerInput input = base();
  const auto wrote = [&](const std::string& process, std::uint64_t term, std::int64_t ms) {
    add(input, process, Kind::Invoke, "fenced-write", ms, term);
    add(input, process, Kind::Ok, "fenced-write", ms + 1, term, "accepted");
  };
  campaign(input, "c1", 5, 10, 1010);
  wrote("c1", 5, 20);
  resign(input, "c1", 5, 300);
  campaign(input, "c2", 6, 302, 1302);
  wrote("c2", 6, 310);
  resign(input, "c2", 6, 600);
  input.store["k"].acceptedTokens = {5, 6};
  input.store["k"].acceptedCount = 2;
  CHECK(passes(input, 1));
  input.store["k"].acceptedTokens = {5, 5};  // an equal term taken again
  CHECK_FALSE(passes(input, 1));
  input.store["k"].acceptedTokens = {6, 5};  // a lower one after a higher
  CHECK_FALSE(passes(input, 1));
  input.store["k"].acceptedTokens = {5};  // c2 says accepted; the store has no such write
  input.store["k"].acceptedCount = 1;
  CHECK_FALSE(passes(input, 1));
}

TEST_CASE("election check 10: an observer that goes back a term fails") {
  CheckerInput input = twoTerms();
  observed(input, "c3", "1", 650, 5, false);
  CHECK_FALSE(passes(input, 10));
}

TEST_CASE("election check 10: a reported leader must be a real term with a value it proclaimed") {
  CheckerInput unknown = twoTerms();
  observed(unknown, "c3", "1", 610, 9, true);
  CHECK_FALSE(passes(unknown, 10));

  CheckerInput value = twoTerms();
  observed(value, "c3", "1", 350, 6, true, 0, "v5");
  CHECK_FALSE(passes(value, 10));
  add(value, "c2", Kind::Invoke, "proclaim", 340, 6, "v5");  // it did proclaim it
  CHECK(passes(value, 10));
}

TEST_CASE("election check 10: a term skipped between two reports must be counted") {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);
  resign(input, "c1", 5, 300);
  campaign(input, "c2", 6, 302, 1302);
  resign(input, "c2", 6, 305);
  campaign(input, "c1", 7, 307, 1307);
  resign(input, "c1", 7, 600);
  watch(input, "c3", "1", 5);
  observed(input, "c3", "1", 11, 5, true);
  observed(input, "c3", "1", 320, 7, true, 1);  // term 6 flagged
  add(input, "c3", Kind::Info, "watch-stop", 700, 0, "1");
  CHECK(passes(input, 10));
  CheckerInput silent = input;
  silent.history.erase(std::remove_if(silent.history.begin(), silent.history.end(),
                                      [](const Op& op) { return op.op == "observed" && op.timeNs == 320 * kMs; }),
                       silent.history.end());
  observed(silent, "c3", "1", 320, 7, true, 0);  // term 6 gone unsaid
  CHECK_FALSE(passes(silent, 10));
}

TEST_CASE("election check 10: a leader's watch of its own term reports it before the resign") {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);
  watch(input, "c1", "s1", 11);
  observed(input, "c1", "s1", 12, 5, true);
  add(input, "c1", Kind::Info, "watch-stop", 299, 0, "s1");
  resign(input, "c1", 5, 300);
  watch(input, "c3", "1", 5);
  observed(input, "c3", "1", 11, 5, true);
  CHECK(passes(input, 10));

  CheckerInput silent = base();  // the watch read nothing in its 3 s, until the resign's message
  campaign(silent, "c1", 5, 10, 5000);
  watch(silent, "c1", "s1", 11);
  add(silent, "c1", Kind::Info, "watch-stop", 3012, 0, "s1");
  resign(silent, "c1", 5, 3013);
  observed(silent, "c1", "s1", 3015, 5, false);
  watch(silent, "c3", "1", 5);
  observed(silent, "c3", "1", 11, 5, true);
  CHECK_FALSE(passes(silent, 10));

  CheckerInput lapsed = silent;  // the term ended for its holder before the resign: not judged
  lapsed.history.erase(std::remove_if(lapsed.history.begin(), lapsed.history.end(),
                                      [](const Op& op) { return op.op == "term"; }),
                       lapsed.history.end());
  add(lapsed, "c1", Kind::Info, "term", 10, 5, std::to_string(2500 * kMs), "v5");
  CHECK(passes(lapsed, 10));

  CheckerInput stopped = base();  // stopped before its bound (the run ended): not judged
  campaign(stopped, "c1", 5, 10, 1010);
  watch(stopped, "c1", "s1", 11);
  add(stopped, "c1", Kind::Info, "watch-stop", 12, 0, "s1");
  resign(stopped, "c1", 5, 13);
  watch(stopped, "c3", "1", 5);
  observed(stopped, "c3", "1", 11, 5, true);
  CHECK(passes(stopped, 10));
}

TEST_CASE("election check 10: a run where no observer reported is vacuous") {
  CheckerInput input = base();
  campaign(input, "c1", 5, 10, 1010);
  CHECK_FALSE(passes(input, 10));
}
