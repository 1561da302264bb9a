// SPDX-License-Identifier: Apache-2.0
// ForkedIncrements.h — the fork() scenario every backend's suite runs: a lock used in this process
// (so its connections, subscriber and threads exist), then children forked with it that each do
// locked non-atomic increments through the inherited lock and then drop it and its backend.
//
//   exerciseBeforeFork(lock, key)      a hold, a waiter subscribed for its release, the watchdog
//   checkForkedIncrements(...)         the rounds of children; CHECKs exit codes and the counter
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ForkedChild.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"

namespace dlock::test {

// Holds `key` under the watchdog while another thread of this process waits for it, until that
// waiter has subscribed to the release; then releases it to the waiter, which releases it too.
inline void exerciseBeforeFork(ILock& lock, const std::string& key) {
  lock.lock(key);
  const std::uint64_t before = lock.stats().attempts;
  std::thread waiter([&] {
    if (lock.tryLock(key, std::chrono::seconds(30))) lock.unlock(key);
  });
  // The waiter tries, queues, tries again, subscribes, and tries once more before it waits.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (lock.stats().attempts < before + 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  lock.unlock(key);
  waiter.join();
}

// `rounds` times: forks `children` children, each doing `increments` locked increments of the
// counter "fork-counter" on `counterServer` through the inherited `lock` (under `key`), then
// dropping `lock` and `backend`; each must exit 0 within `budget`, and the counter be exact.
inline void checkForkedIncrements(std::shared_ptr<ILock>& lock, std::shared_ptr<IOperator>& backend,
                                  const std::string& key, const RedisProcess& counterServer, int rounds, int children,
                                  int increments, std::chrono::milliseconds budget) {
  RedisClient counter(counterServer.host(), counterServer.port());
  (void)counter.ok({"DEL", "fork-counter"});
  for (int round = 1; round <= rounds; ++round) {
    CAPTURE(round);
    std::vector<std::unique_ptr<ForkedChild>> forked;
    for (int i = 0; i < children; ++i) {
      forked.push_back(std::make_unique<ForkedChild>([&] {
        RedisClient own(counterServer.host(), counterServer.port());
        for (int n = 0; n < increments; ++n) {
          lock->lock(key);
          const Reply value = own.ok({"GET", "fork-counter"});
          const long long seen = value.isNil() ? 0 : std::stoll(value.str);
          own.ok({"SET", "fork-counter", std::to_string(seen + 1)});
          lock->unlock(key);
        }
        lock.reset();
        backend.reset();
        return 0;
      }));
    }
    for (auto& child : forked) CHECK(child->exitStatus(budget) == 0);
    REQUIRE(counter.ok({"GET", "fork-counter"}).str == std::to_string(round * children * increments));
  }
}

}  // namespace dlock::test
