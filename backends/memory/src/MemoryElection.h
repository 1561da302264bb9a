// SPDX-License-Identifier: Apache-2.0
// MemoryElection.h — the memory operator's leader records (IElectionOperator): per key, the last
// term proclaimed with its token, value and sequence, and a version that every change raises for
// the watches, which wait on the operator's clock. The same decisions as ElectionScripts.h.
// Owner: one MemoryOperator (a forked child makes its own). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/Clock.h"
#include "dlock/IElectionOperator.h"

namespace dlock::detail {

class MemoryElections : public std::enable_shared_from_this<MemoryElections> {
 public:
  struct Record {
    std::string token;
    std::uint64_t term = 0;
    std::uint64_t sequence = 0;
    std::string value;
    std::uint64_t version = 0;  // raised by every change
  };

  explicit MemoryElections(std::shared_ptr<Clock> clock) : clock_(std::move(clock)) {}

  // Writes when `term` is not older than the record's (the caller checked that `token` holds the key).
  bool write(std::string_view key, std::string_view token, std::uint64_t term, std::string_view value);
  [[nodiscard]] Record read(std::string_view key) const;
  void announce(std::string_view key);
  std::unique_ptr<ILeaderWatch> watch(std::string_view key);

 private:
  class Watch;

  const std::shared_ptr<Clock> clock_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Record, std::less<>> records_;  // guarded by mutex_
};

}  // namespace dlock::detail
