// SPDX-License-Identifier: Apache-2.0
// ConditionRace.h — a signal racing an await, round after round (issue 32's "no waiter sleeps to
// its timeout when a signal was sent after its await began"). In each round the waiter takes the
// key and awaits; the signaller, told that round has begun, takes the key — which it can only do
// once the waiter's await has released it — signals and releases. A signal so sent comes after
// the await began, so a waiter that times out lost it (an await that released the key before it
// joined the condition). `waiter` and `signaller` are two locks (two clients) of one backend.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "dlock/ILock.h"
#include "dlock/core/Condition.h"

namespace dlock::test {

struct RaceResult {
  int rounds = 0;    // rounds run (the run stops at the first timeout)
  int timeouts = 0;  // awaits that ran out of `budget`: lost signals
};

inline RaceResult signalRacingAwait(ILock& waiter, ILock& signaller, const std::string& key, int rounds,
                                    std::chrono::milliseconds budget) {
  Condition awaiting = waiter.newCondition(key, "race");
  Condition signalling = signaller.newCondition(key, "race");
  std::mutex mutex;
  std::condition_variable changed;
  int began = 0;      // guarded by mutex: the round the waiter is in (it holds the key)
  bool over = false;  // guarded by mutex
  std::thread signals([&] {
    for (int round = 1;; ++round) {
      {
        std::unique_lock<std::mutex> guard(mutex);
        changed.wait(guard, [&] { return began >= round || over; });
        if (began < round) return;
      }
      signaller.lock(key);  // free once the waiter's await released it
      signalling.signal();
      signaller.unlock(key);
    }
  });
  const auto finish = [&] {
    {
      std::lock_guard<std::mutex> guard(mutex);
      over = true;
    }
    changed.notify_all();
    signals.join();
  };
  RaceResult result;
  try {
    for (int round = 1; round <= rounds; ++round) {
      waiter.lock(key);
      {
        std::lock_guard<std::mutex> guard(mutex);
        began = round;
      }
      changed.notify_all();
      result.rounds = round;
      const bool signalled = awaiting.awaitFor(budget);
      waiter.unlock(key);
      if (!signalled) {
        ++result.timeouts;
        break;
      }
    }
  } catch (...) {
    finish();
    throw;
  }
  finish();
  return result;
}

}  // namespace dlock::test
