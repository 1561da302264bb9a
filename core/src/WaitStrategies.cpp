// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/WaitStrategies.h"

#include <algorithm>
#include <random>

#include "dlock/Validation.h"
#include "dlock/detail/Wakeup.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

void sleepAtMost(milliseconds wanted, milliseconds remaining) {
  const milliseconds sleep = std::min(wanted, remaining);
  if (sleep.count() > 0) pauseInWait(sleep);
}

std::mt19937_64& threadRandom() {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine;
}

}  // namespace

bool pauseInWait(std::chrono::steady_clock::duration duration) { return detail::Wakeup::sleepFor(duration); }

FixedIntervalWait::FixedIntervalWait(milliseconds interval) : interval_(interval) {
  detail::checkPositive(interval, "the interval", "FixedIntervalWait");
}

void FixedIntervalWait::wait(const WaitContext& ctx) { sleepAtMost(interval_, ctx.remaining); }

ExponentialBackoffWait::ExponentialBackoffWait(milliseconds base, milliseconds cap) : base_(base), cap_(cap) {
  detail::checkPositive(base, "the base delay", "ExponentialBackoffWait");
  detail::checkPositive(cap, "the cap", "ExponentialBackoffWait");
}

void ExponentialBackoffWait::wait(const WaitContext& ctx) {
  // base * 2^attempt, saturating at the cap before the shift can overflow.
  const unsigned shift = std::min(ctx.attempt, 30U);
  const auto ceiling = std::min<milliseconds::rep>(cap_.count(), base_.count() << shift);
  std::uniform_int_distribution<milliseconds::rep> pick(0, ceiling);
  sleepAtMost(milliseconds(pick(threadRandom())), ctx.remaining);
}

namespace {

// A release wakes one waiter per process, and the first retry to reach the server wins. Waiters
// that have waited less step back a little, so the longest-waiting one usually wins: roughly
// first come, first served across processes, which keeps the tail of the wait short.
void yieldToOlderWaiters(std::chrono::steady_clock::time_point waitingSince) {
  constexpr std::chrono::microseconds kLongest{150};   // the delay of a waiter that just arrived
  constexpr std::chrono::microseconds kHorizon{5000};  // waited this long: no delay at all
  const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - waitingSince);
  if (waited >= kHorizon || waited.count() < 0) return;
  pauseInWait(kLongest * (kHorizon - waited).count() / kHorizon.count());
}

}  // namespace

NotifyWait::NotifyWait(milliseconds recheck, milliseconds poll) : recheck_(recheck), poll_(poll) {
  detail::checkPositive(recheck, "the recheck interval", "NotifyWait");
  detail::checkPositive(poll, "the poll interval", "NotifyWait");
}

void NotifyWait::wait(const WaitContext& ctx) {
  // Sleep until the holder's lease would end (+1 ms so the key is gone when we retry), but never
  // past the caller's deadline or the recheck bound.
  milliseconds bound = std::min(ctx.remaining, recheck_);
  if (ctx.holderTtl.count() > 0) bound = std::min(bound, ctx.holderTtl + milliseconds(1));
  if (ctx.releases != nullptr) {
    if (bound.count() > 0 && ctx.releases->waitForRelease(bound)) yieldToOlderWaiters(ctx.waitingSince);
    return;
  }
  sleepAtMost(std::min(bound, poll_), ctx.remaining);
}

}  // namespace dlock
