// SPDX-License-Identifier: Apache-2.0
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "dlock/core/WaitStrategies.h"
#include "dlock/memory/MemoryOperator.h"

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

std::chrono::milliseconds timeWait(dlock::IWait& wait, const dlock::WaitContext& ctx) {
  const auto start = Steady::now();
  wait.wait(ctx);
  return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() - start);
}

dlock::WaitContext contextWith(std::chrono::milliseconds remaining, unsigned attempt = 1) {
  dlock::WaitContext ctx;
  ctx.key = "k";
  ctx.attempt = attempt;
  ctx.remaining = remaining;
  return ctx;
}

}  // namespace

TEST_SUITE("WaitStrategies") {
  TEST_CASE("fixed interval sleeps its interval, cut to the remaining time") {
    dlock::FixedIntervalWait wait(30ms);
    CHECK(timeWait(wait, contextWith(10s)) >= 30ms);
    CHECK(timeWait(wait, contextWith(0ms)) < 30ms);
    CHECK_FALSE(wait.wantsReleaseWatch());
  }

  TEST_CASE("exponential back-off stays within its full-jitter ceiling") {
    dlock::ExponentialBackoffWait wait(1ms, 8ms);
    for (unsigned attempt = 1; attempt < 40; ++attempt) {
      CHECK(timeWait(wait, contextWith(10s, attempt)) < 500ms);  // ceiling 8 ms, slack for a busy machine
    }
    CHECK(timeWait(wait, contextWith(0ms, 5)) < 8ms);
  }

  TEST_CASE("notify returns on a release well before the holder's lease ends") {
    dlock::MemoryOperator backend;
    REQUIRE(backend.lock("k", "t", 10000ms).acquired);
    auto watch = backend.watch("k");
    dlock::NotifyWait wait(30s);
    auto ctx = contextWith(30s);
    ctx.holderTtl = 10000ms;
    ctx.releases = watch.get();
    std::thread releaser([&] {
      std::this_thread::sleep_for(50ms);
      (void)backend.unlock("k", "t");
    });
    CHECK(timeWait(wait, ctx) < 5s);
    releaser.join();
  }

  TEST_CASE("notify sleeps no longer than the holder's lease when nobody releases") {
    dlock::MemoryOperator backend;
    REQUIRE(backend.lock("k", "t", 10000ms).acquired);
    auto watch = backend.watch("k");
    dlock::NotifyWait wait(30s);
    auto ctx = contextWith(30s);
    ctx.holderTtl = 40ms;
    ctx.releases = watch.get();
    const auto waited = timeWait(wait, ctx);
    CHECK(waited >= 40ms);
    CHECK(waited < 5s);
  }

  TEST_CASE("notify without a release subscription polls") {
    dlock::NotifyWait wait(1s, 15ms);
    const auto waited = timeWait(wait, contextWith(10s));
    CHECK(waited >= 15ms);
    CHECK(waited < 1s);
  }

  TEST_CASE("strategies reject non-positive settings") {
    CHECK_THROWS((void)dlock::FixedIntervalWait(0ms));
    CHECK_THROWS((void)dlock::ExponentialBackoffWait(0ms, 1ms));
    CHECK_THROWS((void)dlock::NotifyWait(-1ms));
  }
}
