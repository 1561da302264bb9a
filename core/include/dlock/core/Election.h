// SPDX-License-Identifier: Apache-2.0
// Election.h — leader election on the fair lock's queue (LeaderInfo, Leadership, ElectionWatch,
// Election, ElectionBuilder).
//
//   auto election = dlock::ElectionBuilder().backend(dlock::connect(uri)).name("scheduler").build();
//   dlock::Leadership term = election->campaign("host-a:4711", stop.token());
//
// Candidates queue in FIFO order on the fair lock of the election's key; the holder leads. Its
// term is that hold: renewed by the lock's watchdog in its one batch, ended by resign() (which
// hands the key to the next candidate in the same script) or by its lease, and numbered by the
// hold's fencing token, so terms only rise and fenced storage refuses an old leader's writes.
//
//                      isLeader()   proclaim(v)      resign()          fencingToken()
//   leading            true         written          hands off         the term
//   lease ran out      false        LockLostError    LockLostError     the term
//   resigned, moved    false        NotOwnerError    NotOwnerError     NotOwnerError
//
// A term is lost at its local deadline (the send time of its last renewal plus the lease), never
// later: isLeader() turns false and the onLost handler runs; the server ends it no earlier.
// In a forked child no Leadership leads: isLeader() is false and its destructor sends nothing.
// Owner: Election shared (std::shared_ptr); Leadership and ElectionWatch whoever holds them.
// Thread safety: Election is thread-safe; Leadership and ElectionWatch are not (one thread at a
// time, moved freely between threads), except that isLeader() may be asked from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "dlock/Cancel.h"
#include "dlock/Clock.h"
#include "dlock/IOperator.h"
#include "dlock/core/SharedWatchdog.h"

namespace dlock {

// The largest value a leader proclaims; beyond it InvalidArgumentError, before anything is sent.
inline constexpr std::size_t kMaxLeaderValueBytes = 4096;

namespace detail {
class ElectionCore;
class ElectionTerm;
class ElectionObserver;
}  // namespace detail

// A leader seen by leader() or an observer.
struct LeaderInfo {
  bool hasLeader = false;   // false: no leader now ("none")
  std::uint64_t term = 0;   // the leader's term; with no leader, the last term seen (0: none ever)
  std::string value;        // the leader's value (its campaign's, or its last proclaim's)
  // Terms that began and ended since the previous report without being reported (an observer
  // only): a leader that came and went between two reads.
  std::uint64_t skippedTerms = 0;
};

// One term of this process as leader. Move-only; destroying a leading one resigns quietly.
class Leadership {
 public:
  Leadership() noexcept = default;  // leads nothing (a moved-from one is so too)
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;
  Leadership(Leadership&& other) noexcept;
  Leadership& operator=(Leadership&& other) noexcept;
  ~Leadership();

  // True while this term holds, as far as this client knows. Local: no round trip.
  [[nodiscard]] bool isLeader() const noexcept;
  // The term's number, the fencing token of its hold. NotOwnerError on an empty Leadership.
  [[nodiscard]] std::uint64_t fencingToken() const;
  // The value observers see now: one round trip, written only while this term holds the key.
  // LockLostError when the term had ended (also reported to onLost); InvalidArgumentError above
  // kMaxLeaderValueBytes; ConnectionError leaves the value unknown.
  void proclaim(std::string_view value);
  // Ends the term now; the next candidate leads at once (one script). LockLostError when it had
  // ended already; ConnectionError keeps the term (retry, or let the lease end it). Afterwards
  // the Leadership is empty.
  void resign();
  // Until when the term holds, as far as this client knows (the election's clock).
  [[nodiscard]] std::chrono::steady_clock::time_point validUntil() const;

  explicit operator bool() const noexcept { return term_ != nullptr; }

 private:
  friend class Election;
  friend class detail::ElectionCore;
  Leadership(std::shared_ptr<detail::ElectionTerm> term, bool owning) noexcept;
  const detail::ElectionTerm& term() const;

  std::shared_ptr<detail::ElectionTerm> term_;
  bool owning_ = false;  // false: a view handed to an onLost handler, which resigns nothing
};

// An observation of the leader (Election::observe): stops, and joins its thread, when destroyed.
class ElectionWatch {
 public:
  ElectionWatch() noexcept = default;
  ElectionWatch(const ElectionWatch&) = delete;
  ElectionWatch& operator=(const ElectionWatch&) = delete;
  ElectionWatch(ElectionWatch&& other) noexcept;
  ElectionWatch& operator=(ElectionWatch&& other) noexcept;
  ~ElectionWatch();

  // No callback runs after this returns (unless called from the callback itself). Idempotent.
  void stop() noexcept;

 private:
  friend class Election;
  explicit ElectionWatch(std::shared_ptr<detail::ElectionObserver> observer) noexcept;

  std::shared_ptr<detail::ElectionObserver> observer_;
};

class Election {
 public:
  using LostHandler = std::function<void(const Leadership& lost)>;
  using ObserveHandler = std::function<void(const LeaderInfo& now)>;

  Election(const Election&) = delete;
  Election& operator=(const Election&) = delete;
  ~Election();

  // Queues this process as a candidate with `value` and waits until it leads: returns a term
  // whose local deadline is ahead, its value proclaimed. A place or a hold that ended on the way
  // queues again; it never returns a term it does not hold. InterruptedError when `cancel` is
  // cancelled or close() is called (no place and no hold left behind); ConnectionError or
  // BackendError when the backend fails (nothing held); InvalidArgumentError for a value above
  // kMaxLeaderValueBytes (nothing sent).
  [[nodiscard]] Leadership campaign(std::string_view value, const CancelToken& cancel = {});

  // Runs `handler` (on a thread of dlock's) when a term of this process is lost: at its local
  // deadline unrenewed, or found ended by the backend. Replaces the previous handler.
  void onLost(LostHandler handler);

  // Calls `handler` on a thread of its own with the leader now, then at each change in term
  // order: a new term, a new value, "none" (at a resign, or within a round trip of a lease's
  // end). It subscribes before it reads, reads again after a reconnect, and counts terms it
  // could not see (LeaderInfo::skippedTerms). The handler must not throw (logged if it does).
  [[nodiscard]] ElectionWatch observe(ObserveHandler handler);

  // The leader now, or nullopt for none: one round trip.
  [[nodiscard]] std::optional<LeaderInfo> leader();

  // Ends every campaign (InterruptedError), resigns this process's terms and refuses new
  // campaigns. Idempotent; the destructor does the same.
  void close() noexcept;

  [[nodiscard]] const std::string& name() const noexcept;
  // This process's leadership and counts, for metrics (ElectionMetrics.h).
  [[nodiscard]] bool leading() const noexcept;
  [[nodiscard]] std::uint64_t termsStarted() const noexcept;
  [[nodiscard]] std::uint64_t termsLost() const noexcept;

 private:
  friend class ElectionBuilder;
  explicit Election(std::shared_ptr<detail::ElectionCore> core);

  std::shared_ptr<detail::ElectionCore> core_;
};

class ElectionBuilder {
 public:
  ElectionBuilder() = default;

  ElectionBuilder& backend(std::shared_ptr<IOperator> backend);
  // The election's name: any key (LockBuilder's rules); its fair lock's key is "election:<name>".
  ElectionBuilder& name(std::string name);
  // A term's lease, renewed every third of it (default 15 s): a dead leader's successor leads
  // within it (plus a round trip).
  ElectionBuilder& lease(std::chrono::milliseconds lease);
  // How long a candidate's place lasts unrenewed (default: the term's lease): a dead candidate is
  // skipped after it, so candidates that died with their leader (one host's workers) delay the
  // takeover no longer than the leader's own lease does.
  ElectionBuilder& candidateLease(std::chrono::milliseconds lease);
  // The clock of terms and waits; a VirtualClock in tests.
  ElectionBuilder& clock(std::shared_ptr<Clock> clock);
  // Renews the terms on `watchdog` (SharedWatchdog.h), in one batch with the other primitives and
  // elections given it, when built on its clock (unset: the watchdog's); dlock::Client gives its own.
  ElectionBuilder& watchdog(SharedWatchdog watchdog);

  // ConfigError without a backend or a name, for a lease out of LockBuilder's range, or a backend
  // that cannot keep one queue per name (Redlock: the message says why).
  [[nodiscard]] std::shared_ptr<Election> build() const;

 private:
  std::shared_ptr<IOperator> backend_;
  std::shared_ptr<Clock> clock_;
  std::optional<SharedWatchdog> watchdog_;
  std::string name_;
  std::chrono::milliseconds lease_{std::chrono::seconds(15)};
  std::optional<std::chrono::milliseconds> candidateLease_;  // unset: lease_
};

}  // namespace dlock
