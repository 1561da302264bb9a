// SPDX-License-Identifier: Apache-2.0
// Each check of the Checker fails on a hand-built history for exactly its reason, and a clean
// history passes them all; each rule has a history that must fail and one that must pass. Times
// are in milliseconds from 0; the recovery bound is 100 ms. A hold's owner token is "o<token>",
// and each acquisition has its evidence (LeaseRecorder.h): sent at its invoke, valid 100 ms.
#include <doctest/doctest.h>

#include <algorithm>

#include "Checker.h"
#include "FairOrder.h"
#include "LateWrites.h"
#include "redis/src/KeyNames.h"
#include "ServerObserver.h"
#include "Timeline.h"

using dlock::nemesis::CheckerInput;
using dlock::nemesis::Kind;
using dlock::nemesis::Op;

namespace {

constexpr std::int64_t kMs = 1'000'000;

void record(CheckerInput& input, const std::string& process, Kind kind, const std::string& op, const std::string& key,
            std::uint64_t token, std::int64_t ms, std::string value = "", std::string errorType = "") {
  Op record;
  record.process = process;
  record.kind = kind;
  record.op = op;
  record.key = key;
  record.token = token;
  record.value = std::move(value);
  record.timeNs = ms * kMs;
  record.errorType = std::move(errorType);
  input.history.push_back(std::move(record));
}

// The backend confirmed an acquisition or renewal of (key, owner) sent at `ms`, valid `validMs`.
void lease(CheckerInput& input, const std::string& process, const std::string& key, const std::string& owner,
           std::int64_t ms, std::int64_t validMs) {
  record(input, process, Kind::Info, "lease", key, 0, ms, std::to_string(validMs));
  input.history.back().message = owner;
}

// An acquisition completed at `okMs`, sent at `okMs - 1` and valid `validMs` by its evidence.
void acquired(CheckerInput& input, const std::string& process, const std::string& key, std::uint64_t token,
              std::int64_t okMs, std::int64_t validMs = 100) {
  record(input, process, Kind::Invoke, "acquire", key, 0, okMs - 1);
  lease(input, process, key, "o" + std::to_string(token), okMs - 1, validMs);
  record(input, process, Kind::Ok, "acquire", key, token, okMs, "o" + std::to_string(token));
}

// One whole iteration from `ms` on: acquire (invoke, ok at +1), fenced write, release (+5, +6).
void cycle(CheckerInput& input, const std::string& process, const std::string& key, std::uint64_t token,
           std::int64_t ms, const std::string& releaseError = "") {
  acquired(input, process, key, token, ms + 1, 10);
  record(input, process, Kind::Invoke, "fenced-write", key, token, ms + 2);
  record(input, process, Kind::Ok, "fenced-write", key, token, ms + 3, "accepted");
  record(input, process, Kind::Invoke, "release", key, token, ms + 5);
  if (releaseError.empty()) {
    record(input, process, Kind::Ok, "release", key, token, ms + 6);
  } else {
    record(input, process, Kind::Fail, "release", key, token, ms + 6, "", releaseError);
  }
}

void fault(CheckerInput& input, const std::string& name, std::int64_t startMs, std::int64_t endMs,
           const std::string& target = "", const std::string& targetKey = "") {
  record(input, "nemesis", Kind::Info, "fault-start", target, 0, startMs, name);
  input.history.back().message = targetKey;
  record(input, "nemesis", Kind::Info, "fault-end", target, 0, endMs, name);
}

// The store's own record of an accepted fenced write.
void accept(CheckerInput& input, const std::string& key, std::uint64_t token) {
  input.store[key].acceptedTokens.push_back(token);
  ++input.store[key].acceptedCount;
  input.store[key].lastToken = token;
}

// Two clients take turns on "k" (tokens 1..6); a pause of c2 from 8 to 10 ms finds it holding
// "k"; a partition from 20 to 30 ms, during which c1's acquire fails with a ConnectionError;
// both run on well past the recovery bound.
CheckerInput cleanRun() {
  CheckerInput input;
  input.recoveryBound = std::chrono::milliseconds(100);
  cycle(input, "c1", "k", 1, 0);
  acquired(input, "c2", "k", 2, 7);
  record(input, "c2", Kind::Invoke, "release", "k", 2, 11);
  record(input, "c2", Kind::Ok, "release", "k", 2, 12);
  fault(input, "pause", 8, 10, "c2", "k");
  fault(input, "partition", 20, 30);
  record(input, "c1", Kind::Invoke, "acquire", "k", 0, 25);
  record(input, "c1", Kind::Fail, "acquire", "k", 0, 28, "", "ConnectionError");
  cycle(input, "c1", "k", 3, 31);
  cycle(input, "c2", "k", 4, 40);
  cycle(input, "c1", "k", 5, 300);
  cycle(input, "c2", "k", 6, 310);
  input.store["k"] = {{1, 3, 4, 5, 6}, 5, 6, 0};
  input.keysWithoutTtl = {"dlock:{k}:fence"};
  input.exits.resize(2);
  input.exits[0].process = "c1";
  input.exits[1].process = "c2";
  input.serverRecord = false;  // no server record: check 11 has nothing to judge
  return input;
}

// The server's record (ServerObserver.h) of a lock-key command at `ms` on node "n1", run by a
// caller with arguments `caller` that came `lagMs` before it.
void serverWrite(CheckerInput& input, const std::string& op, std::int64_t ms, const std::string& value,
                 std::uint64_t px, const std::string& caller, std::int64_t lagMs = 0) {
  record(input, "server", Kind::Info, op, "k", px, ms, value);
  input.history.back().message =
      "n1 " + std::to_string(lagMs * kMs) + " " + std::to_string(ms * 1000) + " h | " + caller;
}

}  // namespace

TEST_SUITE("Checker") {
  TEST_CASE("a clean history passes every check") {
    const auto report = dlock::nemesis::check(cleanRun());
    CHECK(report.failedChecks() == "");
    CHECK_FALSE(report.failed());
    CHECK(report.acquisitionsOk == 6);
    CHECK(report.acquireFailures == 1);
    CHECK(report.fencedAccepted == 5);
    CHECK(report.recoveryMs.size() == 4);
    CHECK(report.recoveryP50Ms == doctest::Approx(11));  // c2 at 41 ms, after the partition
    CHECK(report.recoveryMaxMs == doctest::Approx(31));  // c2 at 41 ms, after the pause
    CHECK(report.faults == 2);
    CHECK(report.faultsOnHolders == 1);
    CHECK(report.errorsByType.at("ConnectionError") == 1);
    CHECK(report.markdownRow().find("PASS") != std::string::npos);
    CHECK(report.json().find("\"failed\": false") != std::string::npos);
  }

  TEST_CASE("an accepted token not above the one before fails the fenced store check") {
    auto input = cleanRun();
    input.store["k"].acceptedTokens = {1, 3, 4, 5, 5, 6};
    input.store["k"].acceptedCount = 6;
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "1");
    CHECK(report.failed());
  }

  TEST_CASE("a fenced count that differs from the accepted tokens fails the fenced store check") {
    auto input = cleanRun();
    input.store["k"].acceptedCount = 4;
    CHECK(dlock::nemesis::check(input).failedChecks() == "1");
  }

  TEST_CASE("an unfenced loss fails unless a fault with the named cause touched that key: a paused writer's write "
            "that landed after its evidence ran out") {
    auto input = cleanRun();
    // c1 holds k2 from 201 (valid until 211 by its evidence), writes from 209 to 215; c2 read the
    // counter before that write landed and wrote after it: one update lost on k2.
    acquired(input, "c1", "k2", 1, 201, 10);
    record(input, "c1", Kind::Invoke, "write", "k2", 1, 209);
    record(input, "c1", Kind::Ok, "write", "k2", 1, 215, "1");
    record(input, "c1", Kind::Invoke, "release", "k2", 1, 216);
    record(input, "c1", Kind::Fail, "release", "k2", 1, 217, "", "LockLostError");
    acquired(input, "c2", "k2", 2, 212, 10);
    record(input, "c2", Kind::Invoke, "write", "k2", 2, 213);
    record(input, "c2", Kind::Ok, "write", "k2", 2, 216, "1");
    record(input, "c2", Kind::Invoke, "release", "k2", 2, 218);
    record(input, "c2", Kind::Ok, "release", "k2", 2, 219);
    input.store["k2"] = {{}, 0, 0, 1};
    auto report = dlock::nemesis::check(input);
    CHECK(report.unfencedLostUpdates == 1);
    CHECK(report.unfencedLostByKey.at("k2") == 1);
    CHECK(report.failedChecks() == "2");
    input.overlapCause = "a paused process";
    CHECK(dlock::nemesis::check(input).failedChecks() == "2");  // no pause touched that write
    auto otherPause = input;
    fault(otherPause, "SIGSTOP c2", 210, 214, "c2", "k2");  // the other process's
    CHECK(dlock::nemesis::check(otherPause).failedChecks() == "2");
    fault(input, "SIGSTOP c1", 210, 214, "c1", "k2");
    report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.checks[1].reason.find("a paused process") != std::string::npos);
  }

  TEST_CASE("a paused writer's late write excuses only the updates that landed while it was in flight") {
    auto input = cleanRun();
    input.overlapCause = "a paused process";
    // As above: c1's write from 209 (paused 210-214) lands at 215, after its evidence ran out at
    // 211, and c2's stale write at 216 loses it. Later, two more of c2's writes go missing, long
    // after that pause: nothing excuses them.
    acquired(input, "c1", "k2", 1, 201, 10);
    record(input, "c1", Kind::Invoke, "write", "k2", 1, 209);
    record(input, "c1", Kind::Ok, "write", "k2", 1, 215, "1");
    record(input, "c1", Kind::Invoke, "release", "k2", 1, 216);
    record(input, "c1", Kind::Fail, "release", "k2", 1, 217, "", "LockLostError");
    fault(input, "SIGSTOP c1", 210, 214, "c1", "k2");
    acquired(input, "c2", "k2", 2, 212, 10);
    record(input, "c2", Kind::Invoke, "write", "k2", 2, 213);
    record(input, "c2", Kind::Ok, "write", "k2", 2, 216, "1");
    record(input, "c2", Kind::Invoke, "release", "k2", 2, 218);
    record(input, "c2", Kind::Ok, "release", "k2", 2, 219);
    input.store["k2"] = {{}, 0, 0, 1};
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
    acquired(input, "c2", "k2", 3, 251, 10);
    record(input, "c2", Kind::Ok, "write", "k2", 3, 253, "2");
    record(input, "c2", Kind::Ok, "write", "k2", 3, 254, "3");
    record(input, "c2", Kind::Invoke, "release", "k2", 3, 255);
    record(input, "c2", Kind::Ok, "release", "k2", 3, 256);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.unfencedLostByKey.at("k2") == 3);
    CHECK(report.failedChecks() == "2");
    CHECK(report.checks[1].reason.find("(1 writes landed inside") != std::string::npos);
  }

  TEST_CASE("losses and surpluses of the unfenced counter are judged per key, never summed across keys") {
    auto input = cleanRun();
    record(input, "c1", Kind::Ok, "write", "a", 1, 2, "1");
    record(input, "c1", Kind::Ok, "write", "a", 1, 3, "2");
    input.store["a"] = {{}, 0, 0, 1};  // one lost on a
    input.store["b"] = {{}, 0, 0, 1};  // one counted on b, no write completed there
    auto report = dlock::nemesis::check(input);
    CHECK(report.unfencedLostUpdates == 1);
    CHECK(report.unfencedSurplus == 1);
    CHECK(report.failedChecks() == "2");
    input.store["a"].counter = 2;
    CHECK(dlock::nemesis::check(input).failedChecks() == "2");  // b alone
    record(input, "c1", Kind::Fail, "write", "b", 1, 4, "", "StoreError");  // in doubt: it may have landed
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
  }

  TEST_CASE("a write a client calls accepted that the store does not list fails the fenced store check") {
    auto input = cleanRun();
    cycle(input, "c2", "k", 7, 330);  // says accepted; the store never saw token 7
    // Not in the store's list: also a refused write the holder was not told of.
    CHECK(dlock::nemesis::check(input).failedChecks().rfind("1,", 0) == 0);
    accept(input, "k", 7);
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
  }

  TEST_CASE("a token lower than one completed before the acquire was invoked fails the fencing token check") {
    auto input = cleanRun();
    cycle(input, "c2", "k", 5, 330);  // c1 completed with 5 at 301 already
    input.history.pop_back();
    input.history.pop_back();
    input.history.pop_back();  // no fenced write or release: the token's one fault is its order
    record(input, "c2", Kind::Invoke, "release", "k", 5, 335);
    record(input, "c2", Kind::Ok, "release", "k", 5, 336);
    input.history.erase(std::remove_if(input.history.begin(), input.history.end(),
                                       [](const Op& op) { return op.process == "c2" && op.op == "fenced-write" && op.timeNs >= 330 * kMs; }),
                        input.history.end());
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "3");
    CHECK(report.fenceRegressions == 1);
  }

  TEST_CASE("tokens that go back pass only where the scenario names the cause, and such a scenario fails without any") {
    auto input = cleanRun();
    input.overlapCause = "lost writes";
    // After a restart with the clock back: c1 gets 2 after 6 completed; the store refuses its
    // write: the higher token 6 came from a hold acquired earlier.
    cycle(input, "c1", "k", 2, 330);
    input.history[input.history.size() - 3].value = "rejected";
    // Once the clock passed the old tokens: c2 gets 10 and writes, after c1's write was refused.
    cycle(input, "c2", "k", 10, 400);
    accept(input, "k", 10);
    auto report = dlock::nemesis::check(input);
    CHECK(report.fenceRegressions == 1);
    CHECK(report.failedChecks() == "3");
    input.fenceRegressionCause = "the server restarted empty with its clock back";
    report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.checks[2].reason.find("allowed here") != std::string::npos);
    // Refusals by an earlier holder's higher token are no loss; nothing was lost or untold.
    CHECK(report.storeRefusedHolds == 1);
    CHECK(report.lostUntold == 0);
    CHECK(report.overlapsWhileValid == 0);

    // The same cause named on a run whose tokens kept rising: it shows nothing.
    auto rising = cleanRun();
    rising.fenceRegressionCause = input.fenceRegressionCause;
    report = dlock::nemesis::check(rising);
    CHECK(report.failedChecks() == "3");
    CHECK(report.checks[2].reason.find("never did") != std::string::npos);
  }

  TEST_CASE("a refused write is still a loss when a later holder's higher token refused it, tokens gone back or not") {
    auto input = cleanRun();
    input.overlapCause = "lost writes";
    input.fenceRegressionCause = "the server restarted empty with its clock back";
    // c1 holds 2 (tokens went back below 6) from 330 to 336; c2 acquires 7 at 332 and writes
    // first: c1's write at 333 is refused by a holder that came after it, and its release says ok.
    record(input, "c1", Kind::Invoke, "acquire", "k", 0, 330);
    record(input, "c1", Kind::Ok, "acquire", "k", 2, 331);
    record(input, "c2", Kind::Invoke, "acquire", "k", 0, 331);
    record(input, "c2", Kind::Ok, "acquire", "k", 7, 332);
    record(input, "c2", Kind::Invoke, "fenced-write", "k", 7, 332);
    record(input, "c2", Kind::Ok, "fenced-write", "k", 7, 332, "accepted");
    accept(input, "k", 7);
    record(input, "c1", Kind::Invoke, "fenced-write", "k", 2, 333);
    record(input, "c1", Kind::Ok, "fenced-write", "k", 2, 333, "rejected");
    record(input, "c1", Kind::Invoke, "release", "k", 2, 335);
    record(input, "c1", Kind::Ok, "release", "k", 2, 336);
    record(input, "c2", Kind::Invoke, "release", "k", 7, 340);
    record(input, "c2", Kind::Ok, "release", "k", 7, 341);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.lostUntold == 1);
    CHECK(report.failedChecks() == "7");
  }

  TEST_CASE("a client that acquires nothing within the bound after a fault ends fails the recovery check") {
    auto input = cleanRun();
    // c2 only times out from the fault's end until well past the bound.
    input.history.erase(std::remove_if(input.history.begin(), input.history.end(),
                                       [](const Op& op) { return op.process == "c2" && op.timeNs >= 40 * kMs; }),
                        input.history.end());
    for (std::int64_t ms = 40; ms < 400; ms += 50) {
      record(input, "c2", Kind::Invoke, "acquire", "k", 0, ms);
      record(input, "c2", Kind::Fail, "acquire", "k", 0, ms + 49, "timeout");
    }
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "4");
    CHECK(report.recoveryViolations == 1);
  }

  TEST_CASE("a client whose history ends before the bound fails the recovery check as unobserved") {
    auto input = cleanRun();
    input.history.erase(std::remove_if(input.history.begin(), input.history.end(),
                                       [](const Op& op) { return op.process == "c2" && op.timeNs >= 40 * kMs; }),
                        input.history.end());
    record(input, "c2", Kind::Invoke, "acquire", "k", 0, 50);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "4");
    CHECK(report.recoveryUnobserved == 1);
    record(input, "c2", Kind::Fail, "acquire", "k", 0, 200, "", "ConnectionError");  // observed past the bound
    CHECK(dlock::nemesis::check(input).recoveryUnobserved == 0);
  }

  TEST_CASE("a client the nemesis killed during the bound is not expected to recover") {
    auto input = cleanRun();
    input.history.erase(std::remove_if(input.history.begin(), input.history.end(),
                                       [](const Op& op) { return op.process == "c2" && op.timeNs >= 40 * kMs; }),
                        input.history.end());
    input.exits[1].signal = 9;
    input.exits[1].killedByNemesis = true;
    input.exits[1].killedNs = 60 * kMs;
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
  }

  TEST_CASE("a client the nemesis paused during the bound is not expected to recover") {
    auto input = cleanRun();
    input.history.erase(std::remove_if(input.history.begin(), input.history.end(),
                                       [](const Op& op) { return op.process == "c2" && op.timeNs >= 40 * kMs; }),
                        input.history.end());
    record(input, "nemesis", Kind::Info, "fault-start", "c2", 0, 35, "pause");
    record(input, "c2", Kind::Invoke, "acquire", "k", 0, 300);
    record(input, "nemesis", Kind::Info, "fault-end", "c2", 0, 400, "pause");
    record(input, "c2", Kind::Ok, "acquire", "k", 9, 401);
    cycle(input, "c1", "k", 10, 450);  // c1 seen past the bound of the pause's end
    accept(input, "k", 10);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.recoveryViolations == 0);
  }

  TEST_CASE("a fault that starts before the bound elapsed interrupts the recovery instead of failing it") {
    auto input = cleanRun();
    input.history.erase(std::remove_if(input.history.begin(), input.history.end(),
                                       [](const Op& op) { return op.process == "c2" && op.timeNs >= 40 * kMs; }),
                        input.history.end());
    fault(input, "partition", 60, 250);  // both recover from it at 301 and 311
    cycle(input, "c2", "k", 9, 310);
    accept(input, "k", 9);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.recoveryInterrupted == 2);  // c2 after the pause (by the partition) and after the partition
  }

  TEST_CASE("an untyped error fails the errors check") {
    auto input = cleanRun();
    record(input, "c1", Kind::Invoke, "read", "k", 5, 302);
    record(input, "c1", Kind::Fail, "read", "k", 5, 302, "", "untyped");
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "5");
    CHECK(report.errorsByType.at("untyped") == 1);
  }

  TEST_CASE("a non-zero exit the nemesis did not cause fails the errors check as a crash") {
    auto input = cleanRun();
    input.exits[0].signal = 11;
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "5");
    CHECK(report.crashes == 1);
  }

  TEST_CASE("a client that exits with the hang code or is killed at the deadline fails the errors check as a hang") {
    auto input = cleanRun();
    input.exits[0].exitCode = dlock::nemesis::kHangExitCode;
    input.exits[1].signal = 9;
    input.exits[1].killedAtDeadline = true;
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "5");
    CHECK(report.hangs == 2);
  }

  TEST_CASE("a client the nemesis killed is no crash") {
    auto input = cleanRun();
    input.exits[0].signal = 9;
    input.exits[0].killedByNemesis = true;
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
  }

  TEST_CASE("a client without an exit status fails the errors check") {
    auto input = cleanRun();
    input.exits.pop_back();
    CHECK(dlock::nemesis::check(input).failedChecks() == "5");
  }

  TEST_CASE("a dlock key without a TTL that is not a fence counter fails the TTL check") {
    auto input = cleanRun();
    input.keysWithoutTtl.push_back("dlock:{k}");
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "6");
    CHECK(report.keysWithoutTtl == 1);
  }

  TEST_CASE("fence counters are recognised by KeyNames' names on one server and on a cluster") {
    using dlock::detail::KeyNames;
    for (const std::string key : {"k", "orders:42", "}odd", "{tag}x", "a}:fence"}) {
      CAPTURE(key);
      CHECK(dlock::nemesis::isFenceCounter(KeyNames("dlock:", key, false).fence(), "dlock:"));
      CHECK(dlock::nemesis::isFenceCounter(KeyNames("dlock:", key, true).fence(), "dlock:"));
      CHECK_FALSE(dlock::nemesis::isFenceCounter(KeyNames("dlock:", key, true).lock(), "dlock:"));
      CHECK_FALSE(dlock::nemesis::isFenceCounter(KeyNames("dlock:", key, false).channel(), "dlock:"));
      CHECK_FALSE(dlock::nemesis::isFenceCounter(KeyNames("other:", key, false).fence(), "dlock:"));
    }
  }

  void faultAround(CheckerInput& input, const std::string& name, const std::string& target = "") {
    fault(input, name, 499, 500, target, target.empty() ? "" : "k");
    input.history.back().timeNs += kMs / 2;
  }

  // c1 holds k from 501 (evidence: sent at 500, valid 100 ms) until it invokes its release at 540;
  // c2 acquires it at 511 (its whole cycle from 510, fenced write accepted). A restart of the
  // server from 505 to 508 touched it, where a test names it.
  CheckerInput overlapRun(const std::string& cause) {
    auto input = cleanRun();
    input.overlapCause = cause;
    // The fault the cause names, from 499 to 500.5 ms: it touched c1's acquisition (sent at 500).
    if (!cause.empty()) faultAround(input, "server SIGKILL, restart");
    acquired(input, "c1", "k", 7, 501);  // valid by its evidence until 600
    cycle(input, "c2", "k", 8, 510);
    accept(input, "k", 8);
    return input;
  }

  TEST_CASE("a lease lost inside its section whose release then succeeds fails the lost lease check") {
    auto input = overlapRun("lost writes");
    record(input, "c1", Kind::Invoke, "release", "k", 7, 540);
    record(input, "c1", Kind::Ok, "release", "k", 7, 541);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "7");
    CHECK(report.lostUntold == 1);
  }

  TEST_CASE("a lost lease is told by a lost notice or by a release that fails with LockLostError") {
    for (const bool notice : {true, false}) {
      CAPTURE(notice);
      auto input = overlapRun("lost writes");
      if (notice) record(input, "c1", Kind::Info, "lost", "k", 7, 520);
      record(input, "c1", Kind::Invoke, "release", "k", 7, 540);
      if (notice) {
        record(input, "c1", Kind::Ok, "release", "k", 7, 541);
      } else {
        record(input, "c1", Kind::Fail, "release", "k", 7, 541, "", "LockLostError");
      }
      const auto report = dlock::nemesis::check(input);
      CHECK(report.failedChecks() == "");
      CHECK(report.lostTold == 1);
    }
  }

  TEST_CASE("a notice that comes after the release returned ok does not tell the loss") {
    auto input = overlapRun("lost writes");
    record(input, "c1", Kind::Invoke, "release", "k", 7, 540);
    record(input, "c1", Kind::Ok, "release", "k", 7, 541);
    record(input, "c1", Kind::Info, "lost", "k", 7, 560);
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "7");
    CHECK(report.lostUntold == 1);
  }

  TEST_CASE("a loss while the evidence shows the holder's lease valid fails the exclusion check unless a fault with "
            "the named cause covers it") {
    auto input = overlapRun("");
    CHECK(input.overlapCause.empty());
    record(input, "c1", Kind::Info, "lost", "k", 7, 520);  // told in time, but after c2 acquired
    record(input, "c1", Kind::Invoke, "release", "k", 7, 540);
    record(input, "c1", Kind::Ok, "release", "k", 7, 541);
    auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "8");
    CHECK(report.exclusionViolations == 1);
    // A named cause alone excuses nothing: no fault touched that overlap.
    input.overlapCause = "a failover without replica acknowledgement";
    CHECK(dlock::nemesis::check(input).failedChecks() == "8");
    // A pause of the holder cannot let the server in while its evidence holds: no excuse either.
    auto paused = input;
    faultAround(paused, "SIGSTOP c1", "c1");
    CHECK(dlock::nemesis::check(paused).failedChecks() == "8");
    // A fault on the server that touched the evidence, before the overlap: excused.
    faultAround(input, "server SIGKILL, restart");
    report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.overlapsExcused == 1);
    CHECK(report.lostTold == 1);
    // ... but not an overlap whose evidence was sent after that fault ended.
    auto renewed = overlapRun("");
    renewed.overlapCause = "lost writes";
    record(renewed, "c1", Kind::Invoke, "release", "k", 7, 540);
    record(renewed, "c1", Kind::Fail, "release", "k", 7, 541, "", "LockLostError");
    fault(renewed, "server SIGKILL, restart", 300, 320);
    CHECK(dlock::nemesis::check(renewed).failedChecks().find('8') != std::string::npos);
  }

  TEST_CASE("every acquisition inside a hold is judged, not only the first: an excused overlap excuses no later one") {
    // c2 comes in at 511, excused (the restart touched c1's evidence, sent at 500); c1's renewal
    // sent at 550 makes its lease valid again until 650, and c2 comes in again at 561.
    auto input = overlapRun("lost writes");
    lease(input, "c1", "k", "o7", 550, 100);
    cycle(input, "c2", "k", 9, 560);
    accept(input, "k", 9);
    record(input, "c1", Kind::Invoke, "release", "k", 7, 590);
    record(input, "c1", Kind::Fail, "release", "k", 7, 591, "", "LockLostError");
    auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "8");
    CHECK(report.overlapsWhileValid == 2);
    CHECK(report.overlapsExcused == 1);
    CHECK(report.lostTold == 1);  // one hold, one loss to be told of
    CHECK(report.checks[7].reason.find("acquired token 9") != std::string::npos);
    // Without the renewal both came in while the evidence the restart touched was what showed c1
    // valid: both excused.
    input.history.erase(std::find_if(input.history.begin(), input.history.end(), [](const Op& op) {
      return op.op == "lease" && op.message == "o7" && op.timeNs == 550 * kMs;
    }));
    report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.overlapsExcused == 2);
  }

  TEST_CASE("a failed release counts as told only by a notice within a lease of its return") {
    for (const std::int64_t noticeMs : {900, 2000}) {
      CAPTURE(noticeMs);
      auto input = overlapRun("lost writes");
      input.lease = std::chrono::milliseconds(1000);
      record(input, "c1", Kind::Invoke, "release", "k", 7, 540);
      record(input, "c1", Kind::Fail, "release", "k", 7, 541, "", "ConnectionError");
      record(input, "c1", Kind::Info, "lost", "k", 7, 541 + noticeMs);
      const auto report = dlock::nemesis::check(input);
      CHECK(report.lostTold == (noticeMs < 1000 ? 1 : 0));
      CHECK(report.failedChecks() == (noticeMs < 1000 ? "" : "7"));
    }
  }

  TEST_CASE("a holder whose evidence ran out before the other acquired is no overlap, whatever it was told") {
    auto input = cleanRun();
    acquired(input, "c1", "k", 7, 501, 9);  // valid until 509
    cycle(input, "c2", "k", 8, 510);
    accept(input, "k", 8);
    record(input, "c1", Kind::Info, "invalid", "k", 7, 530, std::to_string(508 * kMs));  // last looked held at 508
    record(input, "c1", Kind::Invoke, "release", "k", 7, 540);
    record(input, "c1", Kind::Fail, "release", "k", 7, 541, "", "LockLostError");
    const auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.lostExpiredFirst == 1);
    CHECK(report.vouchedPastEvidence == 0);
  }

  TEST_CASE("a lock that vouched for a lease past its evidence fails the exclusion check, by any margin") {
    // The audit's case: the local deadline 40 ms late; and one by a microsecond. A renewal's
    // evidence counts from its send on, so the same looks pass when a renewal came in time.
    for (const std::int64_t lateNs : {std::int64_t{40} * kMs, std::int64_t{1000}}) {
      for (const bool renewed : {false, true}) {
        CAPTURE(lateNs);
        CAPTURE(renewed);
        auto input = cleanRun();
        acquired(input, "c1", "k", 7, 501, 9);  // valid until 509 ms
        if (renewed) lease(input, "c1", "k", "o7", 505, 100);
        record(input, "c1", Kind::Info, "invalid", "k", 7, 560, std::to_string(509 * kMs + lateNs));
        record(input, "c1", Kind::Invoke, "release", "k", 7, 570);
        record(input, "c1", Kind::Fail, "release", "k", 7, 571, "", "LockLostError");
        const auto report = dlock::nemesis::check(input);
        CHECK(report.failedChecks() == (renewed ? "" : "8"));
        CHECK(report.vouchedPastEvidence == (renewed ? 0 : 1));
        if (!renewed) CHECK(report.checks[7].reason.find("after its evidence ran out") != std::string::npos);
      }
    }
  }

  TEST_CASE("a write dated past its hold's evidence, or a hold with no evidence at all, fails the exclusion check") {
    auto input = cleanRun();
    acquired(input, "c1", "k", 7, 501, 9);
    record(input, "c1", Kind::Invoke, "write", "k", 7, 508);  // looked at 508: inside
    record(input, "c1", Kind::Ok, "write", "k", 7, 512, "1");
    record(input, "c1", Kind::Invoke, "release", "k", 7, 570);
    record(input, "c1", Kind::Ok, "release", "k", 7, 571);
    input.store["k"].counter = 1;
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
    auto late = input;
    late.history[late.history.size() - 4].timeNs = 510 * kMs;  // looked at 510: outside
    CHECK(dlock::nemesis::check(late).failedChecks() == "8");
    // An acquisition the backend never confirmed (a lost reply counted as taken): no evidence.
    auto unconfirmed = input;
    unconfirmed.history.erase(std::remove_if(unconfirmed.history.begin(), unconfirmed.history.end(),
                                             [](const Op& op) { return op.op == "lease" && op.message == "o7"; }),
                              unconfirmed.history.end());
    const auto report = dlock::nemesis::check(unconfirmed);
    CHECK(report.failedChecks() == "8");
    CHECK(report.checks[7].reason.find("no confirmed acquisition") != std::string::npos);
  }

  TEST_CASE("a fenced write the store refused is a loss even when no other acquisition was recorded") {
    auto input = cleanRun();
    input.overlapCause = "a paused process";
    // c1 says nothing of a loss and its release returns ok; the store never accepted token 9.
    const auto hold = [&](const std::string& written, const std::string& releaseError) {
      record(input, "c1", Kind::Invoke, "acquire", "k", 0, 330);
      record(input, "c1", Kind::Ok, "acquire", "k", 9, 331);
      record(input, "c1", Kind::Invoke, "fenced-write", "k", 9, 332);
      record(input, "c1", Kind::Ok, "fenced-write", "k", 9, 333, written);
      record(input, "c1", Kind::Invoke, "release", "k", 9, 345);
      if (releaseError.empty()) {
        record(input, "c1", Kind::Ok, "release", "k", 9, 346);
      } else {
        record(input, "c1", Kind::Fail, "release", "k", 9, 346, "", releaseError);
      }
    };
    auto swallowed = input;
    hold("accepted", "");
    auto report = dlock::nemesis::check(input);
    CHECK(report.storeRefusedHolds == 1);
    CHECK(report.failedChecks() == "1,7");  // it even calls the write accepted
    input = swallowed;
    hold("rejected", "");
    CHECK(dlock::nemesis::check(input).failedChecks() == "7");
    input = swallowed;
    hold("rejected", "LockLostError");
    report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.lostTold == 1);
  }

  TEST_CASE("the server's record of the key set for another owner inside a section is a loss") {
    auto input = cleanRun();
    input.overlapCause = "lost writes";
    // c1 holds k (owner token "o9") from 331 to 345 and says nothing of a loss; no client
    // recorded another acquisition, but the server set k for owner "x" at 340.
    acquired(input, "c1", "k", 9, 331);
    record(input, "c1", Kind::Invoke, "release", "k", 9, 345);
    record(input, "c1", Kind::Ok, "release", "k", 9, 346);
    record(input, "server", Kind::Info, "server-set", "k", 0, 332, "o9");  // its own
    fault(input, "server SIGKILL, restart", 329, 330);  // the lost writes, touching c1's acquisition
    input.history.back().timeNs += kMs / 2;
    record(input, "server", Kind::Info, "server-watch", "", 0, 336);  // the observer back after it
    cycle(input, "c2", "k", 10, 350);
    cycle(input, "c2", "k", 11, 440);  // seen past the recovery bound
    accept(input, "k", 10);
    accept(input, "k", 11);
    auto own = input;
    record(input, "server", Kind::Info, "server-set", "k", 100, 340, "x");  // PX 100: an orphan, given back in time
    auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "7");
    CHECK(report.lossesSeenByServer == 1);
    CHECK(report.serverSets == 2);
    report = dlock::nemesis::check(own);
    CHECK(report.failedChecks() == "");
    CHECK(report.lossesSeenByServer == 0);
  }

  TEST_CASE("a release that returned ok while the server still held the key for its owner fails check 11") {
    auto input = cleanRun();
    input.serverRecord = true;
    // c1's hold of token 5 ("o5"): acquired at 301, released ok at 306; the server set it until 400.
    serverWrite(input, "server-set", 300, "o5", 100, "EVALSHA acq 1 dlock:{k} o5 100");
    auto released = input;
    serverWrite(released, "server-del", 305, "", 0, "EVALSHA rel 1 dlock:{k} o5");
    auto report = dlock::nemesis::check(released);
    CHECK(report.failedChecks() == "");
    CHECK(report.checks[10].reason.find("1 releases that returned ok") != std::string::npos);
    report = dlock::nemesis::check(input);  // the release never ran on the server
    CHECK(report.failedChecks() == "11");
    CHECK(report.checks[10].reason.find("the server held the key for o5 94.000 ms longer") != std::string::npos);
    auto late = input;  // deleted after the release returned, inside the slack for the record's times
    serverWrite(late, "server-del", 340, "", 0, "EVALSHA rel 1 dlock:{k} o5");
    CHECK(dlock::nemesis::check(late).failedChecks() == "");
    auto read = input;  // timed by the moment the observer read it (a clock had moved): not judged
    serverWrite(read, "server-del", 380, "", 0, "EVALSHA rel 1 dlock:{k} o5");
    std::string& message = read.history.back().message;
    message.replace(message.find(" h |"), 4, " r |");
    CHECK(dlock::nemesis::check(read).failedChecks() == "");
  }

  TEST_CASE("a lock key deleted or set for another owner while its holder's lease lived fails check 11, unless "
            "the command carries the holder's token") {
    auto input = cleanRun();
    input.serverRecord = true;
    serverWrite(input, "server-set", 110, "x1", 100, "EVALSHA acq 1 dlock:{k} x1 100");  // lives until 210
    auto owner = input;
    serverWrite(owner, "server-del", 150, "", 0, "EVALSHA rel 1 dlock:{k} x1");
    auto report = dlock::nemesis::check(owner);
    CHECK(report.failedChecks() == "");
    CHECK(report.serverWritesJudged == 1);
    for (const std::string op : {"server-del", "server-set"}) {
      CAPTURE(op);
      auto other = input;
      serverWrite(other, op, 150, op == "server-set" ? "x2" : "", 100, "EVALSHA acq 1 dlock:{k} x2 100");
      report = dlock::nemesis::check(other);
      CHECK(report.failedChecks() == "11");
      CHECK(report.serverWriteViolations == 1);
      CHECK(report.checks[10].reason.find("x1 held it with 60.000 ms left") != std::string::npos);
      auto expired = input;  // the same after the key's expiry: nothing wrong
      serverWrite(expired, op, 211, op == "server-set" ? "x2" : "", 100, "EVALSHA acq 1 dlock:{k} x2 100");
      CHECK(dlock::nemesis::check(expired).failedChecks() == "");
    }
  }

  TEST_CASE("check 11 counts a key's life from its holder's extends and from the script's call, and forgets what "
            "ran unseen") {
    auto input = cleanRun();
    input.serverRecord = true;
    serverWrite(input, "server-set", 110, "x1", 100, "EVALSHA acq 1 dlock:{k} x1 100", 4);  // from 106: until 206
    auto early = input;
    serverWrite(early, "server-del", 205, "", 0, "DEL dlock:{k}");
    CHECK(dlock::nemesis::check(early).failedChecks() == "11");
    auto late = input;
    serverWrite(late, "server-del", 207, "", 0, "DEL dlock:{k}");
    CHECK(dlock::nemesis::check(late).failedChecks() == "");
    // Records are judged in each server's stream order (the file's).
    auto extended = input;
    serverWrite(extended, "server-expire", 200, "100", 0, "EVALSHA ext 1 dlock:{k} x1 100");  // until 300
    auto watched = extended;
    serverWrite(extended, "server-del", 207, "", 0, "DEL dlock:{k}");
    CHECK(dlock::nemesis::check(extended).failedChecks() == "11");
    // The observer reconnected at 201 (a restart may have lost the key): the DEL is not judged.
    record(watched, "server", Kind::Info, "server-watch", "", 0, 201);
    watched.history.back().message = "n1";
    serverWrite(watched, "server-del", 207, "", 0, "DEL dlock:{k}");
    auto report = dlock::nemesis::check(watched);
    CHECK(report.serverWritesJudged == 0);
    CHECK(report.serverWriteViolations == 0);
    CHECK(report.checks[10].reason.find("vacuous") == 0);  // a record was due, and judged nothing
    // A key whose life spans a move of the server's clock may have expired unseen: forgotten.
    auto clocked = extended;
    fault(clocked, "server clock +3s", 202, 203);
    std::rotate(clocked.history.end() - 3, clocked.history.end() - 2, clocked.history.end());  // the DEL after it
    report = dlock::nemesis::check(clocked);
    CHECK(report.serverWriteViolations == 0);
    // Inside the fault nothing is skipped: a key set there lives on the server's clock, the one it
    // expires by.
    auto inside = input;
    fault(inside, "server clock +3s", 250, 900);
    serverWrite(inside, "server-set", 3400, "x2", 100, "EVALSHA acq 1 dlock:{k} x2 100");
    auto overwritten = inside;
    serverWrite(overwritten, "server-set", 3450, "x3", 100, "EVALSHA acq 1 dlock:{k} x3 100");
    overwritten.history.back().timeNs = 450 * kMs;  // its host time, inside the fault
    overwritten.history[overwritten.history.size() - 2].timeNs = 400 * kMs;
    CHECK(dlock::nemesis::check(overwritten).serverWriteViolations == 1);
    auto expired = inside;
    serverWrite(expired, "server-set", 3550, "x3", 100, "EVALSHA acq 1 dlock:{k} x3 100");
    expired.history.back().timeNs = 550 * kMs;
    expired.history[expired.history.size() - 2].timeNs = 400 * kMs;
    CHECK(dlock::nemesis::check(expired).serverWriteViolations == 0);
    // A strobe moves the clock all through its window: nothing set inside it is known.
    auto strobe = overwritten;
    for (Op& op : strobe.history) {
      if (op.process == "nemesis" && op.value == "server clock +3s") op.value = "server clock strobing +3s / 0s";
    }
    CHECK(dlock::nemesis::check(strobe).serverWriteViolations == 0);
  }

  TEST_CASE("check 11 fails an extend of a live key by a command without its holder's token, and keeps the key") {
    auto input = cleanRun();
    input.serverRecord = true;
    serverWrite(input, "server-set", 110, "x1", 100, "EVALSHA acq 1 dlock:{k} x1 100");  // lives until 210
    auto stolen = input;
    serverWrite(stolen, "server-expire", 150, "100", 0, "EVALSHA ext 1 dlock:{k} x2 100");
    auto report = dlock::nemesis::check(stolen);
    CHECK(report.failedChecks() == "11");
    CHECK(report.checks[10].reason.find("extended by 100 ms while x1 held it") != std::string::npos);
    // An extend after the key expired changes nothing in the model: another's DEL of x1's key,
    // had the extend been placed as x1's, is judged as before.
    auto late = input;
    serverWrite(late, "server-expire", 205, "100", 0, "EVALSHA ext 1 dlock:{k} x1 100");  // x1's: until 305
    serverWrite(late, "server-expire", 260, "100", 0, "EVALSHA ext 1 dlock:{k} x2 100");  // x1's key, live
    CHECK(dlock::nemesis::check(late).failedChecks() == "11");
    auto gone = input;
    serverWrite(gone, "server-expire", 215, "100", 0, "EVALSHA ext 1 dlock:{k} x2 100");  // expired: no-op
    serverWrite(gone, "server-del", 216, "", 0, "EVALSHA rel 1 dlock:{k} x1");
    report = dlock::nemesis::check(gone);
    CHECK(report.failedChecks() == "");
    CHECK(report.serverWritesJudged == 1);  // the DEL: the key stayed in the model
  }

  TEST_CASE("a grant for an owner no client acquired for fails check 11 when kept past the lease it was granted with") {
    auto input = cleanRun();
    input.serverRecord = true;
    serverWrite(input, "server-set", 110, "x1", 100, "EVALSHA acq 1 dlock:{k} x1 100");
    serverWrite(input, "server-del", 150, "", 0, "EVALSHA rel 1 dlock:{k} x1");
    serverWrite(input, "server-set", 160, "x9", 1000, "EVALSHA acq 1 dlock:{k} x9 1000");  // until 1160
    auto expires = input;  // nobody gives it back: it expires with its lease
    auto report = dlock::nemesis::check(expires);
    CHECK(report.failedChecks() == "");
    CHECK(report.orphanGrants == 2);
    CHECK(report.orphanGrantMaxMs == doctest::Approx(1000));
    auto renewed = input;  // renewed by its token past that lease
    serverWrite(renewed, "server-expire", 1100, "1500", 0, "EVALSHA ext 1 dlock:{k} x9 1500");
    report = dlock::nemesis::check(renewed);
    CHECK(report.failedChecks() == "11");
    CHECK(report.orphanGrantViolations == 1);
    CHECK(report.checks[10].reason.find("set for x9, an owner no client acquired for, kept 2440.000 ms, granted for "
                                        "1000.000 ms") != std::string::npos);
    auto regranted = input;  // granted to its token again before it ended
    serverWrite(regranted, "server-set", 900, "x9", 1000, "EVALSHA acq 1 dlock:{k} x9 1000");
    CHECK(dlock::nemesis::check(regranted).orphanGrantViolations == 1);
    auto forever = input;  // set without a TTL
    serverWrite(forever, "server-set", 200, "x8", 0, "SET dlock:{k} x8");
    CHECK(dlock::nemesis::check(forever).orphanGrantViolations == 1);
    auto seen = renewed;  // a client saw that acquisition: no orphan, its renewal is its holder's
    record(seen, "c1", Kind::Ok, "acquire", "k", 99, 161, "x9");
    report = dlock::nemesis::check(seen);
    CHECK(report.orphanGrantViolations == 0);
    CHECK(report.orphanGrants == 1);
  }

  TEST_CASE("a MONITOR line gives its command's arguments, escapes undone") {
    const auto args = dlock::nemesis::parseMonitorLine(
        R"(1700000000.123456 [0 lua] "SET" "dlock:{k\"1}" "a\x00b\\" "PX" "1000")");
    REQUIRE(args.has_value());
    CHECK(args->wallUs == 1700000000123456);
    CHECK(args->args.size() == 5);
    CHECK(args->args.at(1) == "dlock:{k\"1}");
    CHECK(args->args.at(2) == std::string("a\0b\\", 4));
    CHECK(args->fromScript);
    const auto replicated = dlock::nemesis::parseMonitorLine(R"(1700000000.123456 [0 127.0.0.1:7392] "DEL" "k")");
    REQUIRE(replicated.has_value());
    CHECK(replicated->client == "127.0.0.1:7392");
    CHECK_FALSE(replicated->fromScript);
    CHECK_FALSE(dlock::nemesis::parseMonitorLine("OK").has_value());
  }

  TEST_CASE("a nemesis kill excuses the holder only when it came before the other's acquire") {
    for (const std::int64_t killedAt : {505, 515}) {
      CAPTURE(killedAt);
      auto input = overlapRun("");
      record(input, "c1", Kind::Invoke, "fenced-write", "k", 7, 503);  // the last record before the kill
      input.exits[0].signal = 9;
      input.exits[0].killedByNemesis = true;
      input.exits[0].killedNs = killedAt * kMs;
      // Killed at 505, c1 was no longer inside when c2 acquired; killed at 515, it was, untold.
      const auto report = dlock::nemesis::check(input);
      CHECK(report.lostUntold == (killedAt < 511 ? 0 : 1));
      CHECK(report.failedChecks() == (killedAt < 511 ? "" : "7,8"));
    }
  }

  TEST_CASE("a run where no fault found a holder inside its section fails as vacuous") {
    auto input = cleanRun();
    for (Op& op : input.history) {
      if (op.process == "nemesis" && op.value == "pause") op.timeNs += 10 * kMs;  // 18-20 ms: c2 released at 11
    }
    auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "9");
    CHECK(report.faultsOnHolders == 0);
    input.faults.holderHit = false;  // a scenario whose fault does not aim at a holder
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
  }

  TEST_CASE("a fault on a holder whose evidence had run out met no held key and does not hit") {
    auto input = cleanRun();
    for (Op& op : input.history) {
      if (op.op == "lease" && op.message == "o2") op.value = "1";  // c2's lease: 6 to 7 ms; the pause at 8
    }
    auto report = dlock::nemesis::check(input);
    CHECK(report.faultsOnHolders == 0);
    CHECK(report.failedChecks() == "9");
  }

  TEST_CASE("check 12: a cancelled acquire that ended later than the bound after its cancel fails, unless its process "
            "was paused meanwhile") {
    auto input = cleanRun();
    record(input, "c1", Kind::Invoke, "acquire", "k", 0, 400);
    record(input, "c1", Kind::Info, "cancel", "k", 0, 410, "acquire");
    record(input, "c1", Kind::Fail, "acquire", "k", 0, 412, "", "LockError");
    auto report = dlock::nemesis::check(input);
    CHECK(report.checks[11].judged);
    CHECK(report.checks[11].passed);
    CHECK(report.cancelsJudged == 1);
    // Cut off with its call in flight, the cancel waits for the call's timeout.
    record(input, "c2", Kind::Invoke, "acquire", "k", 0, 500);
    record(input, "c2", Kind::Info, "cancel", "k", 0, 510, "acquire");
    record(input, "c2", Kind::Fail, "acquire", "k", 0, 811, "", "LockError");
    report = dlock::nemesis::check(input);
    CHECK_FALSE(report.checks[11].passed);
    CHECK(report.failedChecks() == "12");
    CHECK(report.checks[11].reason.find("c2's acquire of 'k' ended 301") != std::string::npos);
    // The same, with c2 SIGSTOPped between its cancel and its end: its threads stood still.
    fault(input, "SIGSTOP c2", 520, 800, "c2", "k");
    report = dlock::nemesis::check(input);
    CHECK(report.checks[11].passed);
    CHECK(report.checks[11].reason.find("1 with their process paused") != std::string::npos);
    // A Condition await's cancel ends only once the key is held again: not judged.
    auto awaits = cleanRun();
    record(awaits, "c1", Kind::Invoke, "acquire", "k", 0, 400);
    record(awaits, "c1", Kind::Ok, "acquire", "k", 7, 401);
    record(awaits, "c1", Kind::Invoke, "await", "k", 7, 402);
    record(awaits, "c1", Kind::Info, "cancel", "k", 0, 410, "await");
    record(awaits, "c1", Kind::Fail, "await", "k", 7, 900, "", "LockError");
    CHECK_FALSE(dlock::nemesis::check(awaits).checks[11].judged);
  }

  TEST_CASE("a check that cannot fail in a run is left out of its verdict and says so") {
    auto report = dlock::nemesis::check(cleanRun());  // the default lock, no server record
    CHECK(report.checks[9].passed);
    CHECK_FALSE(report.checks[9].judged);
    CHECK_FALSE(report.checks[10].judged);
    CHECK(report.checks[9].reason.find("not judged: not a fair lock") == 0);
    CHECK(report.summary().find("check 10 fair order: left out") != std::string::npos);
    CHECK(report.summary().find("verdict: PASS (left out of the verdict, not judged here: checks 10, 11, 12)") !=
          std::string::npos);
    CHECK(report.json().find("\"judged\": false") != std::string::npos);
    auto recorded = cleanRun();
    recorded.serverRecord = true;
    serverWrite(recorded, "server-set", 110, "x1", 100, "EVALSHA acq 1 dlock:{k} x1 100");
    serverWrite(recorded, "server-del", 150, "", 0, "EVALSHA rel 1 dlock:{k} x1");
    report = dlock::nemesis::check(recorded);
    CHECK(report.checks[10].judged);
    CHECK(report.summary().find("checks 10, 12)") != std::string::npos);
  }

  TEST_CASE("every fault and every cycle whose fault never struck is counted, and a run passes only with as many hits as "
            "cycles") {
    auto input = cleanRun();  // one fault hit (the pause), one did not (the partition aims at nobody)
    record(input, "nemesis", Kind::Info, "fault-miss", "", 0, 200, "no client got inside a hold of the first key");
    auto report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "");
    CHECK(report.faultsOnHolders == 1);
    CHECK(report.faultMisses == 2);
    CHECK(report.markdownRow().find("| 1/2 (0), 2 |") != std::string::npos);
    input.cycles = 2;
    report = dlock::nemesis::check(input);
    CHECK(report.failedChecks() == "9");
    CHECK(report.checks[8].reason.find("2 were to hit") != std::string::npos);
  }

  TEST_CASE("a fault aimed at a waiter hits when its target was waiting for the key") {
    auto input = cleanRun();
    record(input, "c1", Kind::Invoke, "acquire", "k", 0, 320);
    fault(input, "SIGSTOP c1 (waiter)", 321, 330, "c1", "k");
    record(input, "c1", Kind::Fail, "acquire", "k", 0, 340, "timeout");
    auto report = dlock::nemesis::check(input);
    CHECK(report.faultsOnHolders == 2);
    auto late = cleanRun();
    fault(late, "SIGSTOP c1 (waiter)", 321, 330, "c1", "k");  // c1 was not acquiring then
    report = dlock::nemesis::check(late);
    CHECK(report.faultsOnHolders == 1);
    CHECK(report.faultMisses == 2);
  }

  TEST_CASE("a fault that was to take the held key, or to be outlived by the hold, fails when it did not") {
    auto input = cleanRun();
    input.faults.taken = dlock::nemesis::FaultExpectation::Taken::yes;
    CHECK(dlock::nemesis::check(input).failedChecks() == "9");
    input.faults.taken = dlock::nemesis::FaultExpectation::Taken::no;
    CHECK(dlock::nemesis::check(input).failedChecks() == "");
    input.faults.outlivesFault = true;
    for (Op& op : input.history) {
      if (op.process == "nemesis" && op.value == "pause" && op.op == "fault-end") op.timeNs = 11 * kMs + 1;
    }
    CHECK(dlock::nemesis::check(input).failedChecks() == "9");
  }

  TEST_CASE("the timeline draws a lane per key, the holds and the fault windows") {
    const std::string svg = dlock::nemesis::timelineSvg(cleanRun().history);
    CHECK(svg.find("<svg") == 0);
    CHECK(svg.find(">k</text>") != std::string::npos);
    CHECK(svg.find(">partition</text>") != std::string::npos);
    CHECK(svg.find("c2 token 6") != std::string::npos);
  }
}

TEST_SUITE("FairOrder") {
  // The server's record of one key's fair queue (ServerObserver.h), one command per ms.
  struct QueueRecord {
    dlock::nemesis::CheckerInput input;
    std::int64_t ms = 0;
    void add(const std::string& op, const std::string& token) {
      record(input, "server", Kind::Info, op, "k", 0, ++ms, token);
    }
    // A release's hand-off to the head: taken off the queue, then the key set for it.
    void handOff(const std::string& token) {
      add("server-unqueue", token);
      add("server-set", token);
    }
  };

  TEST_CASE("grants in queue order, waiters that left skipped, pass") {
    QueueRecord run;
    run.add("server-set", "A");  // free, nobody queued
    run.add("server-enqueue", "B");
    run.add("server-enqueue", "C");
    run.add("server-enqueue", "D");
    run.add("server-leave", "C");  // timed out
    run.handOff("B");
    run.handOff("D");
    run.add("server-enqueue", "C");  // a new place (its next acquisition's)
    run.handOff("C");
    run.add("server-set", "E");  // free again, nobody queued
    const auto result = dlock::nemesis::checkFairOrder(run.input.history);
    CHECK(result.grants == 5);
    CHECK(result.violations == 0);
    run.input.fair = true;
    const auto report = dlock::nemesis::check(run.input);
    CHECK(report.checks[9].passed);
  }

  TEST_CASE("a waiter whose place lease ended unrenewed is gone: a later grant past it passes, an earlier one fails") {
    // Ops on one node with the server's clock (ms) in the message; the place's end from its ZADD.
    const auto at = [](const std::string& op, const std::string& token, std::int64_t serverMs, std::uint64_t end = 0) {
      Op record;
      record.process = "server";
      record.op = op;
      record.key = "k";
      record.value = token;
      record.token = end;
      record.timeNs = serverMs * kMs;
      record.message = "127.0.0.1:7000 0 " + std::to_string(serverMs * 1000) + " h | EVALSHA acq";
      return record;
    };
    for (const std::int64_t grantMs : {2000, 1999}) {
      CAPTURE(grantMs);
      std::vector<Op> history = {at("server-set", "A", 900), at("server-place-lease", "B", 1000, 2000),
                                 at("server-enqueue", "B", 1000), at("server-set", "C", grantMs)};
      // Its client cut off, B's place (till 2000) ended with the queue's keys, no command seen.
      const auto result = dlock::nemesis::checkFairOrder(history);
      CHECK(result.violations == (grantMs >= 2000 ? 0 : 1));
    }
  }

  TEST_CASE("a waiter served before the one ahead of it fails") {
    QueueRecord run;
    run.add("server-set", "A");
    run.add("server-enqueue", "B");
    run.add("server-enqueue", "C");
    run.handOff("C");
    const auto result = dlock::nemesis::checkFairOrder(run.input.history);
    CHECK(result.violations >= 1);
    CHECK(result.first.find("behind 1 waiter(s), the first B") != std::string::npos);
    run.input.fair = true;
    CHECK_FALSE(dlock::nemesis::check(run.input).checks[9].passed);
  }

  TEST_CASE("a newcomer that takes the key past the queue fails") {
    QueueRecord run;
    run.add("server-set", "A");
    run.add("server-enqueue", "B");
    run.add("server-del", "");
    run.add("server-set", "X");
    const auto result = dlock::nemesis::checkFairOrder(run.input.history);
    CHECK(result.violations == 1);
    CHECK(result.first.find("X took the key") != std::string::npos);
  }

  TEST_CASE("a grant to a waiter that left fails") {
    QueueRecord run;
    run.add("server-set", "A");
    run.add("server-enqueue", "B");
    run.add("server-leave", "B");
    run.add("server-set", "B");
    const auto result = dlock::nemesis::checkFairOrder(run.input.history);
    CHECK(result.violations == 1);
    CHECK(result.first.find("a waiter that had left") != std::string::npos);
  }

  TEST_CASE("a waiter whose leave ran is gone even when its entry stays: a later grant to it fails") {
    for (const bool leaveTakesEntry : {true, false}) {
      CAPTURE(leaveTakesEntry);
      QueueRecord run;
      run.add("server-set", "A");
      run.add("server-enqueue", "B");
      run.add("server-enqueue", "C");
      run.add("server-tombstone", "B");  // B gave up: its leave's first write
      if (leaveTakesEntry) run.add("server-leave", "B");
      run.handOff(leaveTakesEntry ? "C" : "B");  // a leave that kept B's entry hands B the key
      const auto result = dlock::nemesis::checkFairOrder(run.input.history);
      CHECK(result.violations == (leaveTakesEntry ? 0 : 1));
      if (!leaveTakesEntry) CHECK(result.first.find("B, a waiter that had left") != std::string::npos);
    }
  }

  TEST_CASE("a tombstone after the grant (a hand-off that raced the timeout) is no violation") {
    QueueRecord run;
    run.add("server-set", "A");
    run.add("server-enqueue", "B");
    run.handOff("B");
    run.add("server-tombstone", "B");
    run.add("server-enqueue", "C");
    run.handOff("C");
    CHECK(dlock::nemesis::checkFairOrder(run.input.history).violations == 0);
  }

  TEST_CASE("a fair run without a server record is vacuous and fails, and the default lock's passes") {
    dlock::nemesis::CheckerInput input;
    input.fair = true;
    CHECK_FALSE(dlock::nemesis::check(input).checks[9].passed);
    input.fair = false;
    CHECK(dlock::nemesis::check(input).checks[9].passed);
  }
}

TEST_SUITE("LateWrites") {
  // A SET of `k` by a script call the server stamped at `callMs`, whose last argument is `last`.
  Op setBy(std::int64_t callMs, const std::string& last) {
    Op op;
    op.process = "server";
    op.op = "server-set";
    op.key = "k";
    op.value = "tok";
    op.token = 1500;
    op.timeNs = callMs * kMs;
    // 40 µs after its call, as a script's SET comes.
    op.message = "127.0.0.1:7000 40000 " + std::to_string(callMs * 1000 + 40) + " h | EVALSHA acq 2 dlock:{k} dlock:{k}:fence tok 1500 " + last;
    return op;
  }

  TEST_CASE("a write by a call the server ran after the deadline it carried fails, and one by it or with none passes") {
    const std::int64_t call = 1'796'217'680'683;  // server ms
    const std::string deadline = std::to_string(call);
    auto result = dlock::nemesis::checkLateWrites({setBy(call, deadline)});  // ran in its last ms
    CHECK(result.bounded == 1);
    CHECK(result.late == 0);
    result = dlock::nemesis::checkLateWrites({setBy(call + 1, deadline)});
    CHECK(result.late == 1);
    CHECK(result.first.find("1 ms after the deadline") != std::string::npos);
    // No deadline: an empty last argument, a lease, a token, a fence floor in µs.
    for (const std::string last : {"", "1500", "a3f09c11d2e54b67", "1796217680683879"}) {
      CAPTURE(last);
      result = dlock::nemesis::checkLateWrites({setBy(call + 5000, last)});
      CHECK(result.bounded == 0);
    }
  }

  TEST_CASE("check 11 fails a run whose record shows a late write") {
    dlock::nemesis::CheckerInput input;
    input.serverRecord = true;
    input.history.push_back(setBy(1'796'217'680'683, "1796217680000"));
    const auto report = dlock::nemesis::check(input);
    CHECK_FALSE(report.checks[10].passed);
    CHECK(report.checks[10].reason.find("after it") != std::string::npos);
  }
}
