// SPDX-License-Identifier: Apache-2.0
// Holds.h — a history's successful acquisitions, each with how it ended: the unit that the
// checker's fencing and lost-lease checks and the timeline's bars are made of.
//
// A process's records are read in their file order: an acquire invoke, its completion, then the
// release with the same key and token. A hold that was never released (the process died or hung)
// ends at the process's last record.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "History.h"

namespace dlock::nemesis {

struct Hold {
  std::string process;
  std::string key;
  std::uint64_t token = 0;
  std::string ownerToken;  // the lock's owner token, as the acquire's completion recorded it
  std::int64_t acquireInvokeNs = 0;
  std::int64_t acquireOkNs = 0;
  std::optional<std::int64_t> releaseInvokeNs;
  std::optional<std::int64_t> releaseEndNs;
  std::string releaseOutcome;  // "ok", the release's error type, "" when it never completed
  // The end of the critical section as the holder saw it: the release invoke, else its last record.
  std::int64_t sectionEndNs = 0;
  // The end of the bar: the release's completion, else the process's last record.
  std::int64_t endNs = 0;
  // The holder learnt it had lost the lease: a lost notice for (key, token), its own check that
  // the lease is no longer held (`invalid`: isHeld() false, its local deadline passed), or a
  // release that failed with LockLostError. toldNs is the earliest of them.
  bool told = false;
  std::optional<std::int64_t> toldNs;
  // The earliest notice inside the section (a lost notice or `invalid`), not the release: only
  // these can show that the lease had ended for the holder before another client acquired.
  std::optional<std::int64_t> noticedNs;
  // The fenced write of this hold, when it completed: when, and what the client says the store
  // answered (the checker trusts the store's own list of accepted tokens over it).
  std::optional<std::int64_t> fencedWriteEndNs;
  std::string fencedWriteOutcome;  // "accepted", "rejected", "" when it never completed
  // The evidence that the lease held (LeaseRecorder.h): one [send, send + validity) per
  // acquisition or renewal the backend confirmed, in send order. The only ground for "valid".
  std::vector<std::pair<std::int64_t, std::int64_t>> evidence;
  // The moments the lock vouched for the lease: its holder's last look that found it held
  // (`held`, or the value of `invalid`) and each unfenced write, dated from before its look.
  std::vector<std::int64_t> vouchedNs;
  // The unfenced writes of this hold: (invoke, completion; the invoke when it never completed).
  std::vector<std::pair<std::int64_t, std::int64_t>> writes;

  // Whether the evidence shows the lease valid at `atNs`: some confirmed send at or before it,
  // and its validity not yet run out.
  [[nodiscard]] bool validAt(std::int64_t atNs) const;
  // The end of the evidence interval that covers `atNs`, or nothing.
  [[nodiscard]] std::optional<std::int64_t> validUntil(std::int64_t atNs) const;
  // The send of the record that covers `atNs` for the longest, or nothing.
  [[nodiscard]] std::optional<std::int64_t> coveringSend(std::int64_t atNs) const;
};

// The records grouped by process, each process's in its file order.
[[nodiscard]] std::map<std::string, std::vector<Op>> byProcess(const std::vector<Op>& history);

// Every acquire that completed ok, in process order then time.
[[nodiscard]] std::vector<Hold> extractHolds(const std::vector<Op>& history);

}  // namespace dlock::nemesis
