// SPDX-License-Identifier: Apache-2.0
// IWait.h — what a waiter does between two failed acquire attempts.
//
// Strategies (in <dlock/core/WaitStrategies.h>): FixedIntervalWait (10 ms polling),
// ExponentialBackoffWait (full jitter) and NotifyWait (sleeps until the holder releases or its
// lease would end; the default). One strategy object serves every waiter of a lock at once, so
// implementations are thread-safe.
//
// A wait can be cancelled (a CancelToken, the lock's close()): a strategy that sleeps through
// pauseInWait(), or blocks in WaitContext::releases, is woken at once; one that sleeps otherwise
// (std::this_thread::sleep_for) delays the InterruptedError until its sleep ends.
#pragma once

#include <chrono>
#include <string_view>

#include "dlock/IOperator.h"

namespace dlock {

// Sleeps `duration`, or less when the wait it runs in is cancelled (false then). For IWait
// strategies; outside a wait, a plain sleep.
bool pauseInWait(std::chrono::steady_clock::duration duration);

struct WaitContext {
  std::string_view key;
  unsigned attempt = 1;                    // failed attempts so far, from 1
  std::chrono::milliseconds remaining{0};  // until the caller's deadline; milliseconds::max() for lock()
  std::chrono::milliseconds holderTtl{0};  // the holder's remaining lease from the last attempt; 0 = unknown
  std::chrono::steady_clock::time_point waitingSince;  // the first failed attempt of this acquisition
  IReleaseWatch* releases = nullptr;       // set when wantsReleaseWatch() and the backend supports it
};

class IWait {
 public:
  IWait() = default;
  IWait(const IWait&) = delete;
  IWait& operator=(const IWait&) = delete;
  virtual ~IWait() = default;

  // True when the strategy wants a release subscription (WaitContext::releases).
  [[nodiscard]] virtual bool wantsReleaseWatch() const noexcept { return false; }

  // Blocks at most ctx.remaining before the next attempt.
  virtual void wait(const WaitContext& ctx) = 0;
};

}  // namespace dlock
