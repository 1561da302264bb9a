// Ballot.h — the nodes' answers to one request that RedlockOperator fanned out.
//
// The caller creates a Ballot, marks the nodes it asks, posts one task per node (each calls
// answer() or fail() exactly once) and then close()s it: close() waits until the caller's
// `decided` predicate holds, no asked node is still pending, or a deadline passes, and hands the
// votes back. Answers that arrive after close() are dropped (a late watch is destroyed, a late
// acquire is undone by the release the operator posts after it).
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

  struct Closed {
    Votes votes;
    // True when close() gave up at its deadline with asked nodes still pending.
    bool timedOut = false;
  };

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
      if (closed_) return;  // `value` is destroyed on return, outside the lock
      votes_[node].state = VoteState::Answered;
      votes_[node].value = std::move(value);
    }
    changed_.notify_all();
  }

  void fail(std::size_t node, std::string error, bool backendError, bool unsent = false) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (closed_) return;
      votes_[node].state = VoteState::Failed;
      votes_[node].error = std::move(error);
      votes_[node].backendError = backendError;
      votes_[node].unsent = unsent;
    }
    changed_.notify_all();
  }

  // Waits until `decided(votes)` is true, no vote is pending, or `deadline`; then closes.
  template <class Decided>
  Closed close(Clock::time_point deadline, Decided decided) {
    std::unique_lock<std::mutex> guard(mutex_);
    const auto settled = [&] { return decided(static_cast<const Votes&>(votes_)) || !anyPending(); };
    const bool done = changed_.wait_until(guard, deadline, settled);
    closed_ = true;
    Closed result;
    result.timedOut = !done;
    result.votes = std::move(votes_);
    return result;
  }

  // close() that waits for every asked node (or the deadline).
  Closed closeWhenAllAnswered(Clock::time_point deadline) {
    return close(deadline, [](const Votes&) { return false; });
  }

 private:
  bool anyPending() const {
    return std::any_of(votes_.begin(), votes_.end(), [](const Vote<T>& v) { return v.state == VoteState::Pending; });
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  Votes votes_;          // guarded by mutex_
  bool closed_ = false;  // guarded by mutex_
};

}  // namespace dlock::detail
