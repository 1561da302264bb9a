// SPDX-License-Identifier: Apache-2.0
// WatchdogThread.h — the one thread that renews the leases of one or more primitives (each a
// Watchdog, Watchdog.h): a lock made alone has its own; every primitive of a dlock::Client
// shares the client's (SharedWatchdog.h).
//
// A lease is renewed once a third of its primitive's watchdog lease has passed since its last
// renewal, by its own local deadline: so a lease handed over with a short claim (a fair hand-off)
// is renewed at once, not a third of the lease after the first hold. At each tick every lease due
// within half its interval goes in the same round, whatever primitive it is of: leases whose
// backend renews every kind at once (IRenewalBatch) in one call per backend (one round trip per
// node on Redis), each still by its own kind's script for its own lease; the others in one call
// per primitive (LeaseRenewer). Outcomes are per lease and judged by its own primitive (Watchdog).
// A lease whose renewal went unanswered is tried again after a quarter of what it has left (at
// most an interval), and kept until its local deadline, when the thread wakes to report it lost.
//
// Ownership: whoever shares the watchdog holds it by shared_ptr (the primitives' Watchdogs, a
// SharedWatchdog); the last of them stops the thread (joined, or left to end on its own when
// that happens on the thread itself). Leases are kept with their primitive by weak reference.
// Owner: shared. Thread safety: thread-safe.
#pragma once

#include <memory>

#include "LeaseState.h"
#include "dlock/Clock.h"

namespace dlock::detail {

class Watchdog;

class WatchdogThread {
 public:
  // The thread's name, as /proc/<pid>/task/<tid>/comm shows it.
  static constexpr const char* kThreadName = "dlock-watchdog";

  explicit WatchdogThread(std::shared_ptr<Clock> clock);
  WatchdogThread(const WatchdogThread&) = delete;
  WatchdogThread& operator=(const WatchdogThread&) = delete;
  ~WatchdogThread();

  // Starts renewing `lease` for `owner` (the thread starts with the first one).
  void add(const std::shared_ptr<Watchdog>& owner, std::shared_ptr<LeaseState> lease);
  // `owner`'s leases leave the watchdog; returns once no round is renewing them (at once on the
  // thread itself). The other primitives' leases stay.
  void remove(const Watchdog& owner);
  // A lease in its care again after a release that failed (in doubt, or held again): the thread
  // counts it in its next wake; returns once it does (at once on the thread itself).
  void resumeCare();

  [[nodiscard]] const std::shared_ptr<Clock>& clock() const noexcept;

 private:
  class Core;
  const std::shared_ptr<Core> core_;
};

}  // namespace dlock::detail
