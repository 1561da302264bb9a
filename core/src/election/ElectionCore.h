// SPDX-License-Identifier: Apache-2.0
// ElectionCore.h — an election's shared state: its fair lock (the candidates' queue, the terms'
// watchdog), the backend's leader record, the terms this process holds, the lost handler and the
// counts. Election, Leadership and ElectionWatch are handles on it.
// Owner: shared by the Election, its terms and observers. Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Clock.h"
#include "dlock/IElectionOperator.h"
#include "dlock/ILock.h"
#include "dlock/core/Election.h"

namespace dlock::detail {

class ElectionTerm;

class ElectionCore : public std::enable_shared_from_this<ElectionCore> {
 public:
  ElectionCore(std::string name, std::shared_ptr<IOperator> backend, IElectionOperator& records,
               std::shared_ptr<ILock> lock, std::shared_ptr<Clock> clock);
  ElectionCore(const ElectionCore&) = delete;
  ElectionCore& operator=(const ElectionCore&) = delete;
  ~ElectionCore();

  // Hands the lock's loss notices to this core; once, right after it is made.
  void start();

  Leadership campaign(std::string_view value, const CancelToken& cancel);
  void onLost(Election::LostHandler handler);
  std::optional<LeaderInfo> leader();
  void close() noexcept;

  // A term of this process ended without a resign: counted and handed to the handler, once.
  void reportLost(const std::shared_ptr<ElectionTerm>& term);
  // A term resigned or given up: no longer this process's.
  void forget(std::uint64_t term);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  [[nodiscard]] IElectionOperator& records() const noexcept { return records_; }
  [[nodiscard]] const std::shared_ptr<Clock>& clock() const noexcept { return clock_; }
  [[nodiscard]] std::string describe() const;
  [[nodiscard]] bool leading() const noexcept;
  [[nodiscard]] std::uint64_t termsStarted() const noexcept { return termsStarted_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t termsLost() const noexcept { return termsLost_.load(std::memory_order_relaxed); }

 private:
  // The lock's notice of the hold with fencing token `term` lost.
  void lockLost(std::uint64_t term);
  // The new term registered; false when close() came first.
  bool keep(const std::shared_ptr<ElectionTerm>& term);

  const std::string name_;
  const std::string key_;
  const std::shared_ptr<IOperator> backend_;  // keeps records_ alive
  IElectionOperator& records_;
  const std::shared_ptr<ILock> lock_;
  const std::shared_ptr<Clock> clock_;

  mutable std::mutex mutex_;
  std::map<std::uint64_t, std::weak_ptr<ElectionTerm>> terms_;  // guarded by mutex_; by term
  std::shared_ptr<const Election::LostHandler> handler_;         // guarded by mutex_
  bool closed_ = false;                                          // guarded by mutex_
  std::atomic<std::uint64_t> termsStarted_{0};
  std::atomic<std::uint64_t> termsLost_{0};
};

// InvalidArgumentError above kMaxLeaderValueBytes.
void checkLeaderValue(std::string_view value, const char* operation);

}  // namespace dlock::detail
