// SPDX-License-Identifier: Apache-2.0
// The signal-racing-await rounds (ConditionRace.h) on the memory backend: none leaves the waiter
// to its timeout; and the rounds do catch an await that releases the key before it joins the
// condition (two steps, as a release then an enqueue would be), composed here as a test double
// over IConditionOperator whose window between the steps lets the signal through.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ConditionDoubles.h"
#include "ConditionRace.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/core/WaitStrategies.h"
#include "dlock/memory/MemoryOperator.h"

using namespace std::chrono_literals;

namespace {

// A memory backend whose await releases the key, lets the next signal go by, and only then takes
// the key back and joins: a lost signal each time.
class TwoStepAwait final : public dlock::test::ForwardingConditions {
 public:
  using ForwardingConditions::ForwardingConditions;

 private:
  dlock::AwaitResult doAwait(std::string_view key, std::string_view name, std::string_view token,
                             dlock::ConditionLock lock, std::uint64_t /*fencingToken*/, std::chrono::milliseconds ttl,
                             std::chrono::milliseconds waiterLease) override {
    std::uint64_t before = 0;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      before = signals_;
    }
    if (!inner_->unlock(key, token).released) return {};
    {
      std::unique_lock<std::mutex> guard(mutex_);
      (void)signalled_.wait_for(guard, 10s, [&] { return signals_ > before; });
    }
    dlock::AcquireResult again;
    while (!(again = inner_->lock(key, token, ttl)).acquired) std::this_thread::sleep_for(1ms);
    return inner_->await(key, name, token, lock, again.fencingToken, ttl, waiterLease);
  }
  dlock::SignalResult doSignal(std::string_view key, std::string_view name, std::string_view token,
                               dlock::ConditionLock lock, bool all) override {
    const dlock::SignalResult result = ForwardingConditions::doSignal(key, name, token, lock, all);
    {
      std::lock_guard<std::mutex> guard(mutex_);
      ++signals_;
    }
    signalled_.notify_all();
    return result;
  }

  std::mutex mutex_;
  std::condition_variable signalled_;
  std::uint64_t signals_ = 0;  // guarded by mutex_
};

std::shared_ptr<dlock::ILock> lockOver(const std::shared_ptr<dlock::IOperator>& backend, bool fair = false) {
  return dlock::LockBuilder().backend(backend).waitStrategy(std::make_shared<dlock::NotifyWait>(5ms)).fair(fair).build();
}

}  // namespace

TEST_SUITE("ConditionRace") {
  TEST_CASE("a signal racing await never leaves the waiter to its timeout on the memory backend") {
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      auto backend = std::make_shared<dlock::MemoryOperator>();
      auto waiter = lockOver(backend, fair);
      auto signaller = lockOver(backend, fair);
      const dlock::test::RaceResult result = dlock::test::signalRacingAwait(*waiter, *signaller, "race", 10000, 10s);
      CHECK(result.rounds == 10000);
      CHECK(result.timeouts == 0);
    }
  }

  TEST_CASE("the race catches an await that releases the key before it joins the condition") {
    auto backend = std::make_shared<TwoStepAwait>(std::make_shared<dlock::MemoryOperator>());
    auto waiter = lockOver(backend);
    auto signaller = lockOver(backend);
    const dlock::test::RaceResult result = dlock::test::signalRacingAwait(*waiter, *signaller, "race", 100, 300ms);
    CHECK(result.timeouts == 1);  // the first round already
    CHECK(result.rounds == 1);
  }
}
