// SPDX-License-Identifier: Apache-2.0
// RetryPolicy's decisions, alone: what each verdict and failure lead to, and the budget's end.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "redis/src/RetryPolicy.h"

using namespace std::chrono_literals;
using dlock::detail::Failure;
using dlock::detail::Next;
using dlock::detail::RetryPolicy;
using Step = RetryPolicy::Step;

TEST_SUITE("RetryPolicy") {
  TEST_CASE("a stale pooled connection is replaced once per call, at once") {
    RetryPolicy policy(1s);
    CHECK(policy.afterFailure(Failure::Stale, Next::Final) == Step::Now);
    CHECK(policy.afterFailure(Failure::Stale, Next::Final) == Step::GiveUp);
  }

  TEST_CASE("a failure where nothing moved is the call's outcome, a move is followed within the budget") {
    RetryPolicy policy(1s);
    CHECK(policy.afterFailure(Failure::Io, Next::Final) == Step::GiveUp);
    CHECK(policy.afterFailure(Failure::NoConnection, Next::Unchanged) == Step::GiveUp);
    CHECK(policy.afterFailure(Failure::Io, Next::Moved) == Step::Now);
    RetryPolicy spent(0ms);
    CHECK(spent.afterFailure(Failure::Io, Next::Moved) == Step::GiveUp);
    CHECK(spent.reason() == " (retried for 0 ms)");
  }

  TEST_CASE("redirections are followed at once up to kMaxRedirects, whatever the budget") {
    RetryPolicy policy(0ms);
    for (unsigned i = 0; i < RetryPolicy::kMaxRedirects; ++i) CHECK(policy.afterReply(Next::Redirected, false) == Step::Now);
    CHECK(policy.afterReply(Next::Redirected, false) == Step::GiveUp);
    CHECK(policy.reason() == ": more than 16 redirections");
  }

  TEST_CASE("a subscription cannot follow an ASK") {
    RetryPolicy policy(1s);
    policy.setSubscribing();
    CHECK(policy.afterReply(Next::Redirected, true) == Step::GiveUp);
    CHECK(policy.reason() == ": the slot is moving");
    CHECK(policy.afterReply(Next::Redirected, false) == Step::Now);
  }

  TEST_CASE("a \"not now\" and a missing node are retried after growing pauses, each ending within the budget") {
    RetryPolicy policy(300ms);
    CHECK(policy.afterReply(Next::Final, false) == Step::GiveUp);
    const auto start = std::chrono::steady_clock::now();
    std::chrono::milliseconds total{0};
    int retries = 0;
    while (policy.afterReply(Next::Unchanged, false) == Step::AfterPause) {
      const auto pause = policy.pause();
      CHECK(pause >= 1ms);    // never a tight loop
      CHECK(pause <= 100ms);  // the cap
      CHECK(std::chrono::steady_clock::now() + pause <= start + 300ms + 50ms);
      total += pause;
      ++retries;
      std::this_thread::sleep_for(pause);
    }
    CHECK(policy.reason() == " (retried for 300 ms)");
    // 5 ms doubling to 100 ms, each jittered into [step/2, step]: a handful of retries, not hundreds.
    CHECK(retries >= 3);
    CHECK(retries <= 20);
    CHECK(total <= 300ms);
    RetryPolicy spent(0ms);
    CHECK(spent.whenNowhere() == Step::GiveUp);
    RetryPolicy fresh(1s);
    CHECK(fresh.whenNowhere() == Step::AfterPause);
    CHECK(fresh.pause() >= 1ms);
  }
}
