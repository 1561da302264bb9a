// SPDX-License-Identifier: Apache-2.0
// WaitStrategies.h — the IWait implementations.
//
//   FixedIntervalWait        sleeps a fixed interval (10 ms) between attempts
//   ExponentialBackoffWait   sleeps a random time in [0, min(cap, base * 2^attempt)] ("full jitter")
//   NotifyWait               sleeps until the holder's release message arrives or its lease would
//                            end, whichever is first; the default. Falls back to polling when the
//                            backend cannot notify.
//
// Every wait is cut to the caller's remaining time. Thread safety: thread-safe; one object
// serves every waiter of a lock.
#pragma once

#include <chrono>

#include "dlock/IWait.h"

namespace dlock {

class FixedIntervalWait final : public IWait {
 public:
  explicit FixedIntervalWait(std::chrono::milliseconds interval = std::chrono::milliseconds(10));
  void wait(const WaitContext& ctx) override;

 private:
  std::chrono::milliseconds interval_;
};

class ExponentialBackoffWait final : public IWait {
 public:
  explicit ExponentialBackoffWait(std::chrono::milliseconds base = std::chrono::milliseconds(2),
                                  std::chrono::milliseconds cap = std::chrono::milliseconds(200));
  void wait(const WaitContext& ctx) override;

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds cap_;
};

class NotifyWait final : public IWait {
 public:
  // `recheck` bounds each sleep even when the holder's lease is long, so a release message lost
  // with a dropped subscriber connection costs at most that much. `poll` is the interval used
  // when the backend has no release notifications.
  explicit NotifyWait(std::chrono::milliseconds recheck = std::chrono::seconds(1),
                      std::chrono::milliseconds poll = std::chrono::milliseconds(10));
  [[nodiscard]] bool wantsReleaseWatch() const noexcept override { return true; }
  void wait(const WaitContext& ctx) override;

 private:
  std::chrono::milliseconds recheck_;
  std::chrono::milliseconds poll_;
};

}  // namespace dlock
