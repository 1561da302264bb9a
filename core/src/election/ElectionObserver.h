// SPDX-License-Identifier: Apache-2.0
// ElectionObserver.h — one observe(): a thread that subscribes to the leader's changes, then
// reads the record, reports what changed, and waits for the next change or the term's end.
//
//   read shows                       reported
//   the first read                   the leader or none
//   a new term                       it, with the terms proclaimed and ended between uncounted
//   the same term, a new value       it
//   no live hold (resign, expiry)    none, once
//   a term older than the last one   nothing: reports never go back
//
// Owner: its ElectionWatch. Thread safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "dlock/IElectionOperator.h"
#include "dlock/core/Election.h"

namespace dlock::detail {

class ElectionCore;

class ElectionObserver : public std::enable_shared_from_this<ElectionObserver> {
 public:
  ElectionObserver(std::shared_ptr<ElectionCore> core, Election::ObserveHandler handler);
  ElectionObserver(const ElectionObserver&) = delete;
  ElectionObserver& operator=(const ElectionObserver&) = delete;
  ~ElectionObserver();

  // Subscribes on the calling thread (so its errors reach observe()), then starts the thread.
  void start();
  void stop() noexcept;

 private:
  void run();
  // What `record` changes against the last report, if anything.
  std::optional<LeaderInfo> change(const LeaderRecord& record);
  void deliver(const LeaderInfo& info) noexcept;

  const std::shared_ptr<ElectionCore> core_;
  const Election::ObserveHandler handler_;
  std::unique_ptr<ILeaderWatch> watch_;
  std::thread thread_;
  std::uint64_t generation_ = 0;  // of the process that started the thread
  std::atomic<bool> stopping_{false};
  // The observer thread's own: the last report and the record's sequence at it.
  bool reported_ = false;
  LeaderInfo last_;
  std::uint64_t lastSequence_ = 0;
};

}  // namespace dlock::detail
