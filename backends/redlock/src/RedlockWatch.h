// SPDX-License-Identifier: Apache-2.0
// RedlockWatch.h — one release watch over the watches of several nodes.
//
// A release of a Redlock key deletes it on every node that held it, and each of those nodes
// publishes the release, so a waiter needs to hear it from any one node. waitForRelease() blocks
// on one member watch at a time for at most kSlice, checking the others (without blocking)
// between slices: a release is usually seen at once (the member being waited on got it too) and
// at worst kSlice late. When it returns true it has consumed what every member had seen, since
// one release shows on several nodes. A member on a dead node simply never fires; one whose
// connection drops reports a release, as every watch does when it may have missed one.
// Owner: one waiter. Thread safety: not thread-safe (IReleaseWatch's contract).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "dlock/IOperator.h"

namespace dlock::detail {

class RedlockWatch final : public IReleaseWatch {
 public:
  static constexpr std::chrono::milliseconds kSlice{10};

  // `members` is non-empty.
  explicit RedlockWatch(std::vector<std::unique_ptr<IReleaseWatch>> members);

  bool waitForRelease(std::chrono::milliseconds timeout) override;
  // Told by any member; true when every member tells (else the waiter polls, which consults all).
  bool notifyOnRelease(std::function<void()> heard) override;

 private:
  std::vector<std::unique_ptr<IReleaseWatch>> members_;
  std::size_t next_ = 0;  // the member to block on next
};

}  // namespace dlock::detail
