// SPDX-License-Identifier: Apache-2.0
// MemoryReadWrite.h — the memory operator's read-write locks (IReadWriteOperator): per name, the
// writer or the readers with their leases, the queue of waiters (MemoryFairQueue), the fencing
// counter and a record per token (released read, released write, or a tombstone). The same
// decisions as ReadWriteScripts.h, on the operator's clock.
// Owner: one MemoryOperator's state (a forked child makes its own). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "MemoryFairQueue.h"
#include "dlock/Clock.h"
#include "dlock/IReadWriteOperator.h"

namespace dlock::detail {

class MemoryReadWrite : public std::enable_shared_from_this<MemoryReadWrite> {
 public:
  explicit MemoryReadWrite(std::shared_ptr<Clock> clock);
  MemoryReadWrite(const MemoryReadWrite&) = delete;
  MemoryReadWrite& operator=(const MemoryReadWrite&) = delete;
  ~MemoryReadWrite();

  FairAcquireResult acquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                            std::chrono::milliseconds ttl, std::chrono::milliseconds waiterLease);
  ReleaseResult release(std::string_view name, std::string_view token, ReadWriteMode mode);
  bool downgrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl);
  FairAcquireResult tryUpgrade(std::string_view name, std::string_view token, std::chrono::milliseconds ttl);
  std::vector<ExtendResult> extend(const std::vector<ReadWriteLease>& leases, std::chrono::milliseconds ttl);
  bool leave(std::string_view name, std::string_view token, ReadWriteMode mode, std::chrono::milliseconds ttl);
  std::unique_ptr<IGrantWatch> watch(std::string_view name, std::string_view token);
  ReadWriteInfo inspect(std::string_view name);
  // Forgets every hold, waiter and record (a server restarted empty); fencing counters stay.
  void forget();

  struct Name;

 private:
  class GrantWatch;

  Name& named(std::string_view name);  // created when missing
  // Admits the head of `state`'s queue as far as its turn has come; `self` (the caller's token,
  // or empty) is admitted for its whole ttl and not told. Returns how many were admitted.
  std::uint32_t admit(std::string_view name, Name& state, Clock::time_point now, std::string_view self);
  // After a hold went: drops ended places, admits whoever's turn came, and wakes their watches
  // once `guard` is released. Returns how many were admitted.
  std::uint32_t handOn(std::unique_lock<std::mutex>& guard, std::string_view name, Name& state, Clock::time_point now);

  const std::shared_ptr<Clock> clock_;
  std::mutex mutex_;
  std::condition_variable granted_;              // notified when a waiter is admitted
  std::map<std::string, std::unique_ptr<Name>, std::less<>> names_;  // guarded by mutex_
};

}  // namespace dlock::detail
