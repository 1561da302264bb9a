// SPDX-License-Identifier: Apache-2.0
// ElectionTerm.h — one term of this process: the fair lock's hold (a Lease the watchdog renews)
// and what the term may do with it. A Leadership is a handle on one.
//
//   state               isLeader   proclaim          resign
//   held                local      written / lost    handed off
//   lost (reported)     false      LockLostError     LockLostError
//   resigned            false      NotOwnerError     NotOwnerError
//   in a forked child   false      NotOwnerError     nothing sent
//
// Owner: shared by the Leadership and the election's registry (weakly). Thread safety:
// thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "dlock/Lease.h"

namespace dlock::detail {

class ElectionCore;

class ElectionTerm : public std::enable_shared_from_this<ElectionTerm> {
 public:
  ElectionTerm(std::shared_ptr<ElectionCore> core, Lease lease);
  ElectionTerm(const ElectionTerm&) = delete;
  ElectionTerm& operator=(const ElectionTerm&) = delete;
  ~ElectionTerm();

  [[nodiscard]] bool isLeader() const noexcept;
  [[nodiscard]] std::uint64_t term() const noexcept { return term_; }
  [[nodiscard]] std::chrono::steady_clock::time_point validUntil() const;

  // The first proclaim of a campaign: false (nothing thrown) when the hold ended before it, or
  // its local deadline is no longer ahead once it is written.
  bool begin(std::string_view value);
  void proclaim(std::string_view value);
  void resign();
  // resign() for destructors and close(): logs instead of throwing. In a forked child it sends
  // nothing: the hold is the parent's.
  void resignQuietly() noexcept;
  // True the first time: the caller reports the loss.
  bool claimLossReport() noexcept { return !lossReported_.exchange(true); }

 private:
  // The backend's proclaim; false when the term had ended there.
  bool write(std::string_view value, const char* operation);
  [[nodiscard]] std::string where(const char* operation) const;

  const std::shared_ptr<ElectionCore> core_;
  const std::string token_;
  const std::uint64_t term_;
  const std::uint64_t generation_;  // the fork generation that holds it
  mutable std::mutex mutex_;
  Lease lease_;  // guarded by mutex_; empty once resigned
  std::atomic<bool> lossReported_{false};
};

}  // namespace dlock::detail
