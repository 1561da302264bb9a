// SPDX-License-Identifier: Apache-2.0
// Attempt.h — one waiting primitive as the wait loop (WaitLoop.h) drives it: the default lock
// (DefaultAttempt), the fair lock (FairAttempt); a read, a write or a semaphore's permits fit the
// same moves. The loop owns their order, the state and every pause (WaitPolicy); an attempt owns
// what it says to its backend.
//
//   tryAcquire  one try at the server: Held or Waiting. A try renews a place the waiter holds in a
//               server queue (tries are idempotent for their token); placeRenewal() says how often
//               one is due. Throws what the backend throws, having undone what a cut-off try may
//               still do, or leaving it to leave().
//   join        begins listening for what ends a wait (a release, a hand-off): true when it began
//               now, so the loop tries again before pausing (what came in between went unheard)
//   await       the pause between tries: Held when the key was handed over and the server confirmed
//               it, else nullopt (try again)
//   leave       out of the wait for good (timed out, cancelled, or an error): gives up a server-side
//               place, and, when state.leftOnServer, whatever this token may hold there (a try cut
//               off, or a key a try or hand-off gave us as the wait was cancelled), by token
//
// Cancellation is the loop's (WaitLoop.h): an attempt needs no code for it. Its pauses wake on a
// cancel as long as they sleep through Wakeup (dlock/detail/Wakeup.h): the IWait strategies and
// every backend watch do.
//
// Owner: one acquire call. Thread safety: not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "CleanupLane.h"
#include "WaiterQueue.h"
#include "dlock/Clock.h"
#include "dlock/IOperator.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Fork.h"

namespace dlock::detail {

// The key is ours: from `sentAt` (the lock's clock, when the call that showed it was sent) for
// `validity`.
struct Held {
  std::uint64_t fencingToken = 0;
  Clock::time_point sentAt;
  std::chrono::milliseconds validity{0};
};

// The key is someone else's.
struct Waiting {
  std::chrono::milliseconds holderTtl{0};  // the holder's remaining lease; 0 when unknown
  std::int64_t backendMillis = 0;          // the backend's clock at the try; 0 when unknown
  bool queued = false;                     // the waiter holds a place in a server queue
};

using TryResult = std::variant<Held, Waiting>;

// One wait, as the loop keeps it and the attempt reads it.
struct WaitState {
  std::uint64_t tryNumber = 0;  // the lock's count of tries (LockCounters::attempts) before this one
  unsigned failures = 0;        // tries of this wait that found the key taken
  std::optional<std::chrono::steady_clock::time_point> waitingSince;  // the first of them
  Waiting last;                 // the last of them
  // Something of ours may be on the server for leave() to undo: a place in its queue, or a
  // cut-off try's effect (the key, or a place).
  bool leftOnServer = false;
};

// The pause between two tries, from the policy.
struct Pause {
  std::chrono::milliseconds remaining{0};  // until the caller's deadline; max for none (WaitContext)
  std::chrono::milliseconds sleep{0};      // WaitPolicy::pauseAfter
  CallBudget::TimePoint callDeadline;      // for a call made on waking (confirming a hand-off)
};

// What an attempt borrows from its lock for one acquire of `key` for `ttl`.
struct AttemptTools {
  const std::shared_ptr<IOperator>& backend;
  Clock& clock;          // the lock's: Held::sentAt
  // For what a failed try or a leave could not undo within the wait's budget; reached only then.
  const ForkLocal<CleanupLane>& cleanup;
  std::string_view key;
  std::chrono::milliseconds ttl;
};

class Attempt {
 public:
  Attempt() = default;
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
  virtual ~Attempt() = default;

  // Not before this time: the first try holds back (a release of ours just reached waiters).
  [[nodiscard]] virtual std::optional<std::chrono::steady_clock::time_point> holdBackUntil() { return std::nullopt; }
  // The queue of this process's waiters for the key, when only its head talks to the backend;
  // nullptr when every waiter keeps its own place on the server.
  [[nodiscard]] virtual WaiterQueue* processQueue() noexcept { return nullptr; }
  // How often a place in a server queue is renewed (another try); max for none.
  [[nodiscard]] virtual std::chrono::milliseconds placeRenewal() const noexcept { return std::chrono::milliseconds::max(); }

  virtual TryResult tryAcquire(const WaitState& state) = 0;
  virtual bool join(const WaitState& state) = 0;
  virtual std::optional<Held> await(const WaitState& state, const Pause& pause) = 0;
  virtual void leave(const WaitState& state) noexcept = 0;

  // The token the key is ours for, moved out once Held.
  [[nodiscard]] virtual std::string takeToken() noexcept = 0;
  // For logs: "" for the default lock, "fair, " for the fair lock.
  [[nodiscard]] virtual const char* kind() const noexcept = 0;
};

}  // namespace dlock::detail
