// SPDX-License-Identifier: Apache-2.0
// The read-write and semaphore checks (SharedChecks.h) on hand-built runs: each rule has a run
// that must fail it and one that must pass. Times in ms; a hold's evidence is sent 1 ms before its
// acquisition completes; the store's act log is written by each test in the store's order.
#include <algorithm>

#include <doctest/doctest.h>

#include "Checker.h"

using dlock::nemesis::CheckerInput;
using dlock::nemesis::Kind;
using dlock::nemesis::Op;

namespace {

constexpr std::int64_t kMs = 1'000'000;

void add(CheckerInput& input, const std::string& process, Kind kind, const std::string& op, const std::string& key,
         std::int64_t ms, std::string value = "", std::string message = "", std::uint64_t token = 0) {
  Op record;
  record.process = process;
  record.kind = kind;
  record.op = op;
  record.key = key;
  record.timeNs = ms * kMs;
  record.value = std::move(value);
  record.message = std::move(message);
  record.token = token;
  input.history.push_back(std::move(record));
}

struct HoldSpec {
  std::string process;
  std::string owner;
  std::string mode = "write 1";  // as the client's `mode` record: "read 1", "permits 2"
  std::uint64_t fence = 1;
  std::int64_t okMs = 0;
  std::int64_t validMs = 100;
  std::int64_t enterMs = 0;  // its enter completes 1 ms later
  std::int64_t endMs = 0;    // exit, then the release (invoke, ok 1 ms later)
};

// One hold of "k" as the shared workload records it (Client.cpp, SharedWorkload).
void hold(CheckerInput& input, const HoldSpec& spec) {
  add(input, spec.process, Kind::Invoke, "acquire", "k", spec.okMs - 2);
  add(input, spec.process, Kind::Info, "lease", "k", spec.okMs - 1, std::to_string(spec.validMs), spec.owner);
  add(input, spec.process, Kind::Info, "attempt", "k", spec.okMs,
      "taken " + std::to_string((spec.okMs - 1) * kMs) + " 0 " + spec.mode.substr(0, spec.mode.find(' ')) + " 0",
      spec.owner);
  add(input, spec.process, Kind::Ok, "acquire", "k", spec.okMs, spec.owner, "", spec.fence);
  add(input, spec.process, Kind::Info, "mode", "k", spec.okMs, spec.mode, spec.owner, spec.fence);
  add(input, spec.process, Kind::Invoke, "enter", "k", spec.enterMs, "", "", spec.fence);
  add(input, spec.process, Kind::Ok, "enter", "k", spec.enterMs + 1, "1", "", spec.fence);
  add(input, spec.process, Kind::Invoke, "exit", "k", spec.endMs, "", "", spec.fence);
  add(input, spec.process, Kind::Ok, "exit", "k", spec.endMs, "0", "", spec.fence);
  add(input, spec.process, Kind::Invoke, "release", "k", spec.endMs, "", "", spec.fence);
  add(input, spec.process, Kind::Ok, "release", "k", spec.endMs + 1, "", "", spec.fence);
}

void acts(CheckerInput& input, std::vector<std::string> log) { input.store["k"].acts = std::move(log); }

CheckerInput run(const std::string& primitive) {
  CheckerInput input;
  input.primitive = primitive;
  input.capacity = 2;
  input.lease = std::chrono::milliseconds(100);
  input.recoveryBound = std::chrono::milliseconds(1000);
  input.serverRecord = false;
  input.faults.holderHit = false;
  for (const char* process : {"c1", "c2", "c3"}) input.exits.push_back({process, 0, 0, false, false, {}});
  return input;
}

const dlock::nemesis::CheckResult& checkOf(const dlock::nemesis::Report& report, int number) {
  return report.checks.at(static_cast<std::size_t>(number - 1));
}

}  // namespace

TEST_SUITE("SharedChecks") {
  TEST_CASE("two writers inside at once, both with valid evidence, fail the exclusion check") {
    CheckerInput input = run("rw");
    hold(input, {"c1", "a", "write 1", 1, 10, 100, 11, 50});
    hold(input, {"c2", "b", "write 1", 2, 20, 100, 21, 60});
    acts(input, {"enter a 1", "enter b 1", "exit a 1", "exit b 1"});
    const auto report = dlock::nemesis::check(input);
    CHECK_FALSE(checkOf(report, 8).passed);
    CHECK(report.overlapsWhileValid == 1);
  }

  TEST_CASE("a writer entering after the other's evidence ran out is a loss, told or not, not an overlap") {
    CheckerInput input = run("rw");
    hold(input, {"c1", "a", "write 1", 1, 10, 20, 11, 80});  // evidence to 29 ms
    hold(input, {"c2", "b", "write 1", 2, 40, 100, 41, 60});
    acts(input, {"enter a 1", "enter b 1", "exit b 1", "exit a 1"});
    auto report = dlock::nemesis::check(input);
    CHECK(checkOf(report, 8).passed);
    CHECK_FALSE(checkOf(report, 7).passed);  // c1 never told, its release returned ok
    add(input, "c1", Kind::Info, "invalid", "k", 35, "", "", 1);
    report = dlock::nemesis::check(input);
    CHECK(checkOf(report, 7).passed);
    CHECK(report.lostTold == 1);
  }

  TEST_CASE("readers inside together pass, a writer among them fails") {
    CheckerInput input = run("rw");
    hold(input, {"c1", "a", "read 1", 0, 10, 100, 11, 50});
    hold(input, {"c2", "b", "read 1", 0, 20, 100, 21, 60});
    acts(input, {"enter a 1", "enter b 1", "exit a 1", "exit b 1"});
    CHECK(checkOf(dlock::nemesis::check(input), 8).passed);
    hold(input, {"c3", "c", "write 1", 3, 30, 100, 31, 70});
    acts(input, {"enter a 1", "enter b 1", "enter c 1", "exit a 1", "exit b 1", "exit c 1"});
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 8).passed);
  }

  TEST_CASE("a read upgraded beside another reader is judged as a write from the upgrade's return") {
    CheckerInput input = run("rw");
    hold(input, {"c1", "a", "read 1", 0, 10, 100, 11, 60});
    hold(input, {"c2", "b", "read 1", 0, 20, 100, 21, 70});
    // c1's tryUpgrade returns at 31 (its evidence renewed as sent at 30), then a write section.
    add(input, "c1", Kind::Info, "lease", "k", 30, "100", "a");
    add(input, "c1", Kind::Info, "mode", "k", 31, "write 1", "a");
    add(input, "c1", Kind::Invoke, "enter", "k", 32);
    add(input, "c1", Kind::Ok, "enter", "k", 33, "1");
    add(input, "c1", Kind::Invoke, "exit", "k", 50);
    add(input, "c1", Kind::Ok, "exit", "k", 50, "0");
    std::stable_sort(input.history.begin(), input.history.end(),
                     [](const Op& x, const Op& y) { return x.timeNs < y.timeNs; });
    // As the lock would keep them: c1 upgraded only after c2's section and read hold ended.
    acts(input, {"enter a 1", "enter b 1", "exit a 1", "exit b 1", "enter a 1", "exit a 1"});
    CHECK(checkOf(dlock::nemesis::check(input), 8).passed);
    // A broken upgrade: the write section entered while c2 was still inside.
    acts(input, {"enter a 1", "enter b 1", "exit a 1", "enter a 1", "exit a 1", "exit b 1"});
    const auto report = dlock::nemesis::check(input);
    CHECK_FALSE(checkOf(report, 8).passed);
    CHECK(report.overlapsWhileValid == 1);
  }

  TEST_CASE("a reader that reads a token above its fence with valid evidence fails") {
    CheckerInput input = run("rw");
    hold(input, {"c1", "a", "read 1", 5, 10, 100, 11, 50});
    acts(input, {"enter a 1", "exit a 1"});
    add(input, "c1", Kind::Ok, "read-fence", "k", 30, "5", "", 5);
    CHECK(checkOf(dlock::nemesis::check(input), 8).passed);
    add(input, "c1", Kind::Ok, "read-fence", "k", 40, "7", "", 5);
    CHECK(dlock::nemesis::check(input).vouchedPastEvidence == 1);
  }

  TEST_CASE("more permits inside than the capacity, all valid, fail, up to it pass") {
    CheckerInput input = run("sem");
    hold(input, {"c1", "a", "permits 1", 1, 10, 100, 11, 50});
    hold(input, {"c2", "b", "permits 1", 2, 20, 100, 21, 60});
    acts(input, {"enter a 1", "enter b 1", "exit a 1", "exit b 1"});
    auto report = dlock::nemesis::check(input);
    CHECK(checkOf(report, 8).passed);
    CHECK(report.sharedPeak == 2);
    hold(input, {"c3", "c", "permits 1", 3, 30, 100, 31, 70});
    acts(input, {"enter a 1", "enter b 1", "enter c 1", "exit a 1", "exit b 1", "exit c 1"});
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 8).passed);
  }

  TEST_CASE("permits are judged against the capacity in force: a shrink before both acquires, a growth during one") {
    // Capacity 2 at the start; c1 and c2 hold one permit each from 10 and 20 ms.
    const auto twoHolds = [](std::int64_t resizeMs, const std::string& to) {
      CheckerInput input = run("sem");
      add(input, "c3", Kind::Invoke, "resize", "k", resizeMs, to);
      add(input, "c3", Kind::Ok, "resize", "k", resizeMs + 1, "0");
      hold(input, {"c1", "a", "permits 1", 1, 10, 100, 11, 50});
      hold(input, {"c2", "b", "permits 1", 2, 20, 100, 21, 60});
      acts(input, {"enter a 1", "enter b 1", "exit a 1", "exit b 1"});
      return dlock::nemesis::check(input);
    };
    CHECK(checkOf(twoHolds(2, "2"), 8).passed);
    CHECK_FALSE(checkOf(twoHolds(2, "1"), 8).passed);  // shrunk to 1 before either acquire was sent
    CHECK(checkOf(twoHolds(12, "1"), 8).passed);       // shrunk after c1's acquire: c1 was granted under 2
    // Alone: two permits entered under a capacity of 1 fail as well.
    CheckerInput alone = run("sem");
    add(alone, "c3", Kind::Invoke, "resize", "k", 2, "1");
    add(alone, "c3", Kind::Ok, "resize", "k", 3, "0");
    hold(alone, {"c1", "a", "permits 2", 1, 10, 100, 11, 50});
    acts(alone, {"enter a 2", "exit a 2"});
    CHECK_FALSE(checkOf(dlock::nemesis::check(alone), 8).passed);
    // Grown to 3 before c3's acquire: three inside pass; shrunk back to 2 first, they fail.
    CheckerInput input = run("sem");
    add(input, "c4", Kind::Invoke, "resize", "k", 2, "3");
    add(input, "c4", Kind::Ok, "resize", "k", 3, "0");
    hold(input, {"c1", "a", "permits 1", 1, 10, 100, 11, 50});
    hold(input, {"c2", "b", "permits 1", 2, 20, 100, 21, 60});
    hold(input, {"c3", "c", "permits 1", 3, 30, 100, 31, 70});
    acts(input, {"enter a 1", "enter b 1", "enter c 1", "exit a 1", "exit b 1", "exit c 1"});
    CHECK(checkOf(dlock::nemesis::check(input), 8).passed);
    add(input, "c4", Kind::Invoke, "resize", "k", 4, "2");
    add(input, "c4", Kind::Ok, "resize", "k", 5, "0");
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 8).passed);
  }

  TEST_CASE("a read taken while a writer waited fails writer preference, a reader queued before it passes") {
    CheckerInput input = run("rw");
    // c1's writer queued at 5 ms (sent at 4) and still waits; c2's read is sent at 10 ms.
    add(input, "c1", Kind::Invoke, "acquire", "k", 3);
    add(input, "c1", Kind::Info, "attempt", "k", 5, "queued " + std::to_string(4 * kMs) + " 1 write 0", "w");
    hold(input, {"c2", "r", "read 1", 0, 11, 100, 12, 20});
    acts(input, {"enter r 1", "exit r 1"});
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 10).passed);
    // The same read, but c2 had queued before the writer did: it was ahead of it.
    CheckerInput ahead = run("rw");
    add(ahead, "c2", Kind::Info, "attempt", "k", 2, "queued " + std::to_string(1 * kMs) + " 1 read 0", "r");
    ahead.history.insert(ahead.history.end(), input.history.begin(), input.history.end());
    ahead.store = input.store;
    CHECK(checkOf(dlock::nemesis::check(ahead), 10).passed);
  }

  TEST_CASE("a waiter that admits itself with no lapse to explain it fails the hand-offs check") {
    CheckerInput input = run("sem");
    add(input, "c1", Kind::Invoke, "acquire", "k", 1);
    add(input, "c1", Kind::Info, "attempt", "k", 3, "queued " + std::to_string(2 * kMs) + " 1 permits 0", "s");
    add(input, "c1", Kind::Info, "attempt", "k", 30, "taken " + std::to_string(29 * kMs) + " 0 permits 0", "s");
    add(input, "c1", Kind::Ok, "acquire", "k", 31, "s", "", 9);
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 10).passed);
    // A hold whose evidence ran out before its release was sent: its reclaim explains it.
    hold(input, {"c2", "h", "permits 2", 1, 5, 20, 6, 40});
    CHECK(checkOf(dlock::nemesis::check(input), 10).passed);
  }

  TEST_CASE("a waiter that finds a grant already its own, the whole lease left, was admitted by the release") {
    // Seed 20261202 of the long profile: c3's release handed c1 the permit and c1's recheck ran in
    // the same server millisecond, so the hold it found had all of its 1000 ms left.
    for (const std::string& validity : {std::string("1000"), std::string("0")}) {
      CAPTURE(validity);
      CheckerInput input = run("sem");
      add(input, "c1", Kind::Invoke, "acquire", "k", 1);
      add(input, "c1", Kind::Info, "attempt", "k", 3, "queued " + std::to_string(2 * kMs) + " 1 permits 0", "s");
      add(input, "c1", Kind::Info, "attempt", "k", 4, "taken " + std::to_string(3 * kMs) + " 0 permits " + validity, "s");
      add(input, "c1", Kind::Ok, "acquire", "k", 5, "s", "", 9);
      CHECK(checkOf(dlock::nemesis::check(input), 10).passed == (validity != "0"));  // 0: taken in that call
    }
  }

  TEST_CASE("a lapse explains a waiter's own admission only inside its window, not leases later") {
    CheckerInput input = run("sem");
    add(input, "c1", Kind::Invoke, "acquire", "k", 1);
    add(input, "c1", Kind::Info, "attempt", "k", 3, "queued " + std::to_string(2 * kMs) + " 1 permits 0", "s");
    add(input, "c1", Kind::Info, "attempt", "k", 60, "queued " + std::to_string(59 * kMs) + " 1 permits 0", "s");
    add(input, "c1", Kind::Info, "attempt", "k", 130, "queued " + std::to_string(129 * kMs) + " 1 permits 0", "s");
    add(input, "c1", Kind::Info, "attempt", "k", 191, "taken " + std::to_string(190 * kMs) + " 0 permits 0", "s");
    add(input, "c1", Kind::Ok, "acquire", "k", 192, "s", "", 9);
    // c2's evidence ran out at 24, unreleased: its lease ended on the server by 124 at the latest,
    // before c1's attempt at 190, which found it reclaimed already.
    hold(input, {"c2", "h", "permits 2", 1, 5, 20, 6, 40});
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 10).passed);
    // Without the call at 129, c1's at 190 is the first after the lapse: it reclaimed it and may
    // have admitted c1 (nothing ran on the key between).
    auto first = input;
    first.history.erase(std::remove_if(first.history.begin(), first.history.end(),
                                       [](const Op& op) { return op.op == "attempt" && op.timeNs == 130 * kMs; }),
                        first.history.end());
    CHECK(checkOf(dlock::nemesis::check(first), 10).passed);
    // A waiter whose own place lapsed (no attempt for a lease) comes back as a newcomer.
    auto own = run("sem");
    add(own, "c1", Kind::Invoke, "acquire", "k", 1);
    add(own, "c1", Kind::Info, "attempt", "k", 3, "queued " + std::to_string(2 * kMs) + " 1 permits 0", "s");
    add(own, "c1", Kind::Info, "attempt", "k", 301, "taken " + std::to_string(300 * kMs) + " 0 permits 0", "s");
    add(own, "c1", Kind::Ok, "acquire", "k", 302, "s", "", 9);
    CHECK(checkOf(dlock::nemesis::check(own), 10).passed);
  }

  TEST_CASE("the server's queue seen with a head that fit and no lapse fails the hand-offs check") {
    CheckerInput input = run("sem");
    hold(input, {"c1", "a", "permits 1", 1, 10, 100, 11, 50});
    acts(input, {"enter a 1", "exit a 1"});
    CHECK(checkOf(dlock::nemesis::check(input), 10).passed);
    add(input, "nemesis", Kind::Info, "stranded", "k", 20, "w", std::to_string(21 * kMs));
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 10).passed);
  }

  TEST_CASE("permits still in use after the run fail check 6") {
    CheckerInput input = run("sem");
    hold(input, {"c1", "a", "permits 1", 1, 10, 100, 11, 50});
    acts(input, {"enter a 1", "exit a 1"});
    input.permitsInUseAfter = {{"k", 0}};
    CHECK(checkOf(dlock::nemesis::check(input), 6).passed);
    input.permitsInUseAfter = {{"k", 1}};
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 6).passed);
  }

  TEST_CASE("a run without a section in the act log is vacuous") {
    CheckerInput input = run("rw");
    hold(input, {"c1", "a", "write 1", 1, 10, 100, 11, 50});
    CHECK_FALSE(checkOf(dlock::nemesis::check(input), 8).passed);
  }
}
