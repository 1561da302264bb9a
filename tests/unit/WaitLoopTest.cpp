// SPDX-License-Identifier: Apache-2.0
// WaitLoop and WaitPolicy (core/src): the order of a wait's moves, driven over a scripted attempt,
// and the pauses and call deadlines the policy gives.
#include <doctest/doctest.h>

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/src/Attempt.h"
#include "Fixtures.h"
#include "core/src/LockCounters.h"
#include "core/src/WaitLoop.h"
#include "core/src/WaitPolicy.h"
#include "dlock/Cancel.h"
#include "dlock/IWait.h"
#include "dlock/LockError.h"
#include "dlock/memory/MemoryOperator.h"

using namespace std::chrono_literals;
using dlock::detail::Held;
using dlock::detail::Pause;
using dlock::detail::TryResult;
using dlock::detail::WaitPolicy;
using dlock::detail::Waiting;
using dlock::detail::WaitState;

namespace {

// An attempt that plays a script and records the moves the loop asked of it.
class ScriptedAttempt final : public dlock::detail::Attempt {
 public:
  std::deque<std::function<TryResult()>> tries;
  std::deque<bool> joins;
  std::deque<std::optional<Held>> wakes;
  std::chrono::milliseconds renewal = std::chrono::milliseconds::max();
  std::function<void()> pausing;  // run inside each await (a pause that blocks)

  std::string moves;                  // t(ry) j(oin) a(wait) l(eave)
  std::vector<Pause> pauses;          // each await's
  std::optional<bool> leftAtLeave;    // WaitState::leftOnServer when leave() came
  std::vector<unsigned> failuresSeen; // WaitState::failures at each try

  [[nodiscard]] std::chrono::milliseconds placeRenewal() const noexcept override { return renewal; }
  TryResult tryAcquire(const WaitState& state) override {
    moves += 't';
    failuresSeen.push_back(state.failures);
    REQUIRE_FALSE(tries.empty());
    auto next = std::move(tries.front());
    tries.pop_front();
    return next();
  }
  bool join(const WaitState& /*state*/) override {
    moves += 'j';
    if (joins.empty()) return false;
    const bool now = joins.front();
    joins.pop_front();
    return now;
  }
  std::optional<Held> await(const WaitState& /*state*/, const Pause& pause) override {
    moves += 'a';
    pauses.push_back(pause);
    if (pausing) pausing();
    if (wakes.empty()) return std::nullopt;
    auto wake = wakes.front();
    wakes.pop_front();
    return wake;
  }
  void leave(const WaitState& state) noexcept override {
    moves += 'l';
    leftAtLeave = state.leftOnServer;
  }
  [[nodiscard]] std::string takeToken() noexcept override { return "token"; }
  [[nodiscard]] const char* kind() const noexcept override { return ""; }
};

std::function<TryResult()> held(std::uint64_t fence) {
  return [fence] { return TryResult(Held{fence, {}, 0ms}); };
}
std::function<TryResult()> taken(std::chrono::milliseconds holderTtl, bool queued = false) {
  return [holderTtl, queued] { return TryResult(Waiting{holderTtl, 0, queued}); };
}
std::function<TryResult()> fails(const std::string& why) {
  return [why]() -> TryResult { throw dlock::ConnectionError(why); };
}

struct LoopFixture {
  dlock::MemoryOperator backend;
  dlock::detail::LockCounters counters;
  ScriptedAttempt attempt;

  std::optional<Held> run(WaitPolicy& policy) { return dlock::detail::WaitLoop("k", backend, counters).run(attempt, policy); }
};

auto inAnHour() { return std::chrono::steady_clock::now() + 1h; }

}  // namespace

TEST_SUITE("WaitLoop") {
  TEST_CASE("any attempt is cancellable: a cancel wakes its pause, it leaves its place, InterruptedError") {
    LoopFixture f;
    f.attempt.tries = {taken(0ms, true)};
    dlock::CancelSource stop;
    const dlock::CancelToken never;
    dlock::test::Event paused;
    f.attempt.pausing = [&] {
      paused.set();
      CHECK_FALSE(dlock::pauseInWait(1h));  // woken by the cancel, not an hour later
    };
    std::thread canceller([&] {
      REQUIRE(paused.wait());
      stop.requestCancel();
    });
    const dlock::CancelToken token = stop.token();  // outlives the policy, which refers to it
    WaitPolicy policy(WaitPolicy::Deadline::max(), 1s, {token, never});
    CHECK_THROWS_AS(f.run(policy), dlock::InterruptedError);
    canceller.join();
    CHECK(f.attempt.moves == "tjal");
    CHECK(f.attempt.leftAtLeave == true);
  }

  TEST_CASE("a token cancelled before the wait sends nothing, a key taken as the cancel came is given back") {
    dlock::CancelSource stop;
    const dlock::CancelToken never;
    stop.requestCancel();
    LoopFixture before;
    const dlock::CancelToken cancelled = stop.token();
    WaitPolicy first(inAnHour(), 1s, {cancelled, never});
    CHECK_THROWS_AS(before.run(first), dlock::InterruptedError);
    CHECK(before.attempt.moves.empty());

    dlock::CancelSource racing;
    LoopFixture raced;
    raced.attempt.tries = {[&] {
      racing.requestCancel();  // while the try that takes the key is in flight
      return TryResult(Held{7, {}, 0ms});
    }};
    const dlock::CancelToken closing = racing.token();
    WaitPolicy second(inAnHour(), 1s, {never, closing});  // close() of the lock, as a cancel
    CHECK_THROWS_AS(raced.run(second), dlock::InterruptedError);
    CHECK(raced.attempt.moves == "tl");
    CHECK(raced.attempt.leftAtLeave == true);  // leave() gives the key back by token
  }

  TEST_CASE("a free key is held after one try, with nothing left or waited") {
    LoopFixture f;
    f.attempt.tries = {held(7)};
    WaitPolicy policy(inAnHour(), 1s);
    const auto result = f.run(policy);
    REQUIRE(result);
    CHECK(result->fencingToken == 7);
    CHECK(f.attempt.moves == "t");
    CHECK(f.counters.attempts.load() == 1);
    CHECK(f.counters.failedTries.load() == 0);
  }

  TEST_CASE("a single try that finds the key taken ends at once, leaving nothing on the server") {
    LoopFixture f;
    f.attempt.tries = {taken(50ms)};
    WaitPolicy policy(WaitPolicy::kTryOnce, 1s);
    CHECK_FALSE(f.run(policy));
    CHECK(f.attempt.moves == "tl");
    CHECK(f.attempt.leftAtLeave == false);
    CHECK(f.counters.failedTries.load() == 1);
  }

  TEST_CASE("a single try cut off by a ConnectionError leaves (its effect may land) and throws it") {
    LoopFixture f;
    f.attempt.tries = {fails("reset")};
    WaitPolicy policy(WaitPolicy::kTryOnce, 1s);
    CHECK_THROWS_WITH_AS(f.run(policy), "reset", dlock::ConnectionError);
    CHECK(f.attempt.moves == "tl");
    CHECK(f.attempt.leftAtLeave == true);
    CHECK(f.counters.outageRetries.load() == 0);
  }

  TEST_CASE("an error reply in a wait leaves and throws, without another try") {
    LoopFixture f;
    f.attempt.tries = {[]() -> TryResult { throw dlock::BackendError("NOPERM"); }};
    WaitPolicy policy(inAnHour(), 1s);
    CHECK_THROWS_AS(f.run(policy), dlock::BackendError);
    CHECK(f.attempt.moves == "tl");
    CHECK(f.attempt.leftAtLeave == true);
  }

  TEST_CASE("a wait whose deadline has come makes no pause: the key taken, it leaves its place and times out") {
    LoopFixture f;
    f.attempt.tries = {taken(50ms, true)};
    WaitPolicy policy(std::chrono::steady_clock::now(), 1s);
    CHECK_FALSE(f.run(policy));
    CHECK(f.attempt.moves == "tl");
    CHECK(f.attempt.leftAtLeave == true);
    CHECK(f.counters.failedTries.load() == 1);
  }

  TEST_CASE("listening that began now is followed by another try before any pause") {
    LoopFixture f;
    f.attempt.tries = {taken(50ms), taken(50ms), taken(50ms)};
    f.attempt.joins = {true, false};
    f.attempt.wakes = {std::nullopt, Held{9, {}, 0ms}};
    WaitPolicy policy(inAnHour(), 1s);
    const auto result = f.run(policy);
    REQUIRE(result);
    CHECK(result->fencingToken == 9);
    CHECK(f.attempt.moves == "tjtjatja");
    CHECK(f.attempt.failuresSeen == std::vector<unsigned>{0, 1, 2});
    CHECK(f.counters.attempts.load() == 3);
  }

  TEST_CASE("each pause ends by the holder's lease end (+1 ms) and the renewal of the waiter's place") {
    LoopFixture f;
    f.attempt.renewal = 500ms;
    f.attempt.tries = {taken(40ms), taken(0ms)};
    f.attempt.wakes = {std::nullopt, Held{1, {}, 0ms}};
    WaitPolicy policy(inAnHour(), 1s);
    REQUIRE(f.run(policy));
    REQUIRE(f.attempt.pauses.size() == 2);
    CHECK(f.attempt.pauses[0].sleep == 41ms);
    CHECK(f.attempt.pauses[1].sleep == 500ms);  // the holder's lease unknown
    CHECK(f.attempt.pauses[0].remaining > 59min);
    CHECK(f.attempt.pauses[0].callDeadline == policy.deadline());
  }

  TEST_CASE("a ConnectionError in a wait is ridden out: counted, and the next try made") {
    LoopFixture f;
    f.attempt.tries = {fails("reset"), held(3)};
    WaitPolicy policy(inAnHour(), 1s);
    REQUIRE(f.run(policy));
    CHECK(f.attempt.moves == "tt");
    CHECK(f.counters.outageRetries.load() == 1);
  }
}

TEST_SUITE("WaitPolicy") {
  TEST_CASE("a call's deadline: none for a single try, the wait's own, else the outage budget's once one began") {
    CHECK(WaitPolicy(WaitPolicy::kTryOnce, 1s).callDeadline() == dlock::detail::CallBudget::TimePoint::max());
    const auto deadline = inAnHour();
    CHECK(WaitPolicy(deadline, 1s).callDeadline() == deadline);

    WaitPolicy forever(WaitPolicy::Deadline::max(), 0ms);
    CHECK(forever.callDeadline() == dlock::detail::CallBudget::TimePoint::max());
    const auto beforeCall = std::chrono::steady_clock::now();
    { const dlock::detail::CallBudget budget = forever.call(); }
    const auto afterCall = std::chrono::steady_clock::now();
    // A tolerance of 0 is spent at once: the outage throws on its first failure, naming it.
    CHECK_THROWS_WITH_AS(forever.rideOut(dlock::ConnectionError("refused"), "lock 'k'"),
                         doctest::Contains("over 1 attempt(s); last: refused"), dlock::ConnectionError);
    // Its budget counts from the failing call's send, not from the failure.
    CHECK(forever.callDeadline() >= beforeCall);
    CHECK(forever.callDeadline() <= afterCall);
    forever.answered();
    CHECK(forever.callDeadline() == dlock::detail::CallBudget::TimePoint::max());
  }

  TEST_CASE("pauses are cut to the time left, at least 1 ms, and a single try and a past deadline hold nothing back") {
    const auto now = std::chrono::steady_clock::now();
    const WaitPolicy soon(now + 30ms, 1s);
    CHECK(soon.pauseAfter(0ms, std::chrono::milliseconds::max(), now) == 30ms);
    CHECK(soon.pauseAfter(100ms, 10ms, now) == 10ms);
    CHECK(soon.pauseAfter(0ms, 0ms, now) == 1ms);
    CHECK(soon.remaining(now + 1h) == 0ms);
    CHECK(WaitPolicy(WaitPolicy::Deadline::max(), 1s).remaining(now) == std::chrono::milliseconds::max());

    WaitPolicy past(now - 1ms, 1s);
    CHECK(past.over(now));
    past.holdBack(now + 1h);  // cut at the deadline: returns at once
    WaitPolicy(WaitPolicy::kTryOnce, 1s).holdBack(now + 1h);
  }
}
