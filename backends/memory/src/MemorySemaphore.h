// SPDX-License-Identifier: Apache-2.0
// MemorySemaphore.h — the memory operator's semaphores: the decisions of SemaphoreScripts.h
// (ISemaphoreOperator.h's table) on the operator's clock, which plays the server's. Each token
// has one state (holding, waiting, released, left) that ends at a deadline on that clock; every
// call first reclaims what is due and admits the head waiters that fit, in order, telling each on
// its grant watch. Records and tombstones last kRecordLife, as the Redis records last the client's
// command timeout and retry budget.
// Owner: one MemoryOperator (per process). Thread safety: thread-safe (one mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Clock.h"
#include "dlock/IFairOperator.h"
#include "dlock/ISemaphoreOperator.h"

namespace dlock::detail {

class MemorySemaphores : public std::enable_shared_from_this<MemorySemaphores> {
 public:
  static constexpr std::chrono::milliseconds kRecordLife{2000};

  explicit MemorySemaphores(std::shared_ptr<Clock> clock);
  MemorySemaphores(const MemorySemaphores&) = delete;
  MemorySemaphores& operator=(const MemorySemaphores&) = delete;
  ~MemorySemaphores();

  SemaphoreAcquireResult acquire(std::string_view name, std::string_view token, std::uint32_t permits,
                                 std::uint32_t capacity, std::chrono::milliseconds lease,
                                 std::chrono::milliseconds waiterLease);
  ReleaseResult release(std::string_view name, std::string_view token);
  bool extend(std::string_view name, std::string_view token, std::chrono::milliseconds lease);
  bool leave(std::string_view name, std::string_view token);
  std::uint32_t resize(std::string_view name, std::uint32_t capacity);
  SemaphoreInfo inspect(std::string_view name) const;
  std::unique_ptr<IGrantWatch> watch(std::string_view name, std::string_view token);
  // Forgets every semaphore (a server restarted empty); grant watches stay.
  void forget();

  struct Semaphore;

 private:
  class Watch;

  Semaphore& find(std::string_view name);  // made when missing; mutex_ held
  template <class Decide>
  auto decide(std::string_view name, std::string_view keep, Decide&& decide);
  // Admits head waiters that fit (see the file comment); `caller` is admitted for `callerLease`
  // and not told (its reply tells it). Returns how many; mutex_ held, granted_ notified by the caller.
  std::uint32_t admit(Semaphore& semaphore, Clock::time_point now, std::string_view caller,
                      std::chrono::milliseconds callerLease);

  const std::shared_ptr<Clock> clock_;
  mutable std::mutex mutex_;
  std::condition_variable granted_;                            // notified on every admission
  std::map<std::string, std::unique_ptr<Semaphore>, std::less<>> semaphores_;  // guarded by mutex_
};

}  // namespace dlock::detail
