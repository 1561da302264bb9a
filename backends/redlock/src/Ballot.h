// SPDX-License-Identifier: Apache-2.0
// Ballot.h — the nodes' answers to one request that RedlockOperator fanned out.
//
// The caller creates a Ballot, marks the nodes it asks, and posts one task per node; each task
// calls answer() or fail() exactly once. The caller then wait()s until its `decided` predicate
// holds, no asked node is pending, or a deadline passes, and reads the votes with snapshot().
// Answers keep arriving after the wait; a later snapshot() sees them (the operator uses that to
// learn how a late acquire ended). take() moves the votes out and drops later answers, for
// values that cannot be copied (a late watch is then destroyed by its task).
// Owner: shared by the caller and the node tasks. Thread safety: thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dlock::detail {

enum class VoteState {
  NotAsked,  // the request was not sent to this node
  Pending,   // sent, no answer (yet)
  Answered,  // the node answered; see value
  Failed,    // the call threw, or was not sent because its deadline had passed; see error
};

template <class T>
struct Vote {
  VoteState state = VoteState::NotAsked;
  T value{};
  std::string error;          // when Failed
  bool backendError = false;  // when Failed: an error reply (BackendError), not a connection problem
  bool unsent = false;        // when Failed: never sent (its deadline passed while it was queued)
};

template <class T>
class Ballot {
 public:
  using Votes = std::vector<Vote<T>>;
  using Clock = std::chrono::steady_clock;

  explicit Ballot(std::size_t nodes) : votes_(nodes) {}
  Ballot(const Ballot&) = delete;
  Ballot& operator=(const Ballot&) = delete;

  // Before the node's task is posted.
  void ask(std::size_t node) {
    std::lock_guard<std::mutex> guard(mutex_);
    votes_[node].state = VoteState::Pending;
  }

  void answer(std::size_t node, T value) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (taken_) return;  // `value` is destroyed on return, outside the lock
      votes_[node].state = VoteState::Answered;
      votes_[node].value = std::move(value);
    }
    changed_.notify_all();
  }

  void fail(std::size_t node, std::string error, bool backendError, bool unsent = false) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (taken_) return;
      votes_[node].state = VoteState::Failed;
      votes_[node].error = std::move(error);
      votes_[node].backendError = backendError;
      votes_[node].unsent = unsent;
    }
    changed_.notify_all();
  }

  // Waits until `decided(votes)` is true, no vote is pending, or `deadline`. True when it gave up
  // at the deadline with votes still pending and undecided.
  template <class Decided>
  bool wait(Clock::time_point deadline, Decided decided) {
    std::unique_lock<std::mutex> guard(mutex_);
    const auto settled = [&] { return decided(static_cast<const Votes&>(votes_)) || !anyPending(); };
    return !changed_.wait_until(guard, deadline, settled);
  }

  // wait() for every asked node (or the deadline).
  bool waitForAll(Clock::time_point deadline) {
    return wait(deadline, [](const Votes&) { return false; });
  }

  // The votes now.
  [[nodiscard]] Votes snapshot() const {
    std::lock_guard<std::mutex> guard(mutex_);
    return votes_;
  }

  // The votes now, moved out; later answers are dropped.
  Votes take() {
    std::lock_guard<std::mutex> guard(mutex_);
    taken_ = true;
    return std::move(votes_);
  }

 private:
  bool anyPending() const {
    return std::any_of(votes_.begin(), votes_.end(), [](const Vote<T>& v) { return v.state == VoteState::Pending; });
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Votes votes_;         // guarded by mutex_
  bool taken_ = false;  // guarded by mutex_
};

}  // namespace dlock::detail
