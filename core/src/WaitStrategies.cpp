// SPDX-License-Identifier: Apache-2.0
#include "dlock/core/WaitStrategies.h"

#include <algorithm>
#include <random>

#include "dlock/Validation.h"
#include "dlock/detail/Wakeup.h"

namespace dlock {
namespace {

using std::chrono::milliseconds;

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

NotifyWait::NotifyWait(milliseconds recheck, milliseconds poll) : recheck_(recheck), poll_(poll) {
  detail::checkPositive(recheck, "the recheck interval", "NotifyWait");
  detail::checkPositive(poll, "the poll interval", "NotifyWait");
}

void NotifyWait::wait(const WaitContext& ctx) {
  // Sleep until the holder's lease would end (+1 ms so the key is gone when we retry), but never
  // past the caller's deadline or the recheck bound.
  milliseconds bound = std::min(ctx.remaining, recheck_);
  if (ctx.holderTtl.count() > 0) bound = std::min(bound, ctx.holderTtl + milliseconds(1));
  // A release wakes one registered waiter (not every one: no herd to step back from), which tries
  // at once.
  if (ctx.releases != nullptr) {
    if (bound.count() > 0) (void)ctx.releases->waitForRelease(bound);
    return;
  }
  sleepAtMost(std::min(bound, poll_), ctx.remaining);
}

}  // namespace dlock
