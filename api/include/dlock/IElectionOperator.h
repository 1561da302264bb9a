// SPDX-License-Identifier: Apache-2.0
// IElectionOperator.h — what an election (dlock/core/Election.h) needs from a backend beside the
// fair lock's queue (IFairOperator): the leader's record of one key and a channel of its changes
// (LeaderRecord, ILeaderWatch, IElectionOperator).
//
//   proclaim     `token` holds the key and no later term proclaimed → the record is (term, value);
//                a term new to the record adds one to its sequence; a change is published
//   readLeader   the key's hold and the record together (one atomic read)
//   announce     a change is published, nothing written (a resign that handed nobody the key)
//
// The record names its term's token, so a record left by an ended term never describes the
// holder after it; it lives as long as the fencing counter. Keys and tokens reaching it are
// validated already. A backend without one queue per key (Redlock) does not offer it.
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace dlock {

// The key's leader as the backend sees it in one read.
struct LeaderRecord {
  bool held = false;                       // a live hold whose holder proclaimed the record
  std::uint64_t term = 0;                  // the last term proclaimed (held or not); 0 if none ever
  std::uint64_t sequence = 0;              // how many terms proclaimed on this key so far
  std::string value;                       // the last term's value
  std::chrono::milliseconds remaining{0};  // when held: what the hold has left
};

// Change messages of one key, taken before the read they follow so a change in between is not
// missed. Not thread-safe, except interrupt().
class ILeaderWatch {
 public:
  ILeaderWatch() = default;
  ILeaderWatch(const ILeaderWatch&) = delete;
  ILeaderWatch& operator=(const ILeaderWatch&) = delete;
  virtual ~ILeaderWatch() = default;

  // Blocks until a change was published, one may have been missed (a reconnect, a failover), or
  // interrupt() was called: true; false after `timeout` (on the backend's clock).
  virtual bool waitForChange(std::chrono::milliseconds timeout) = 0;
  // Ends the current wait and every later one at once (any thread).
  virtual void interrupt() noexcept = 0;
};

class IElectionOperator {
 public:
  IElectionOperator() = default;
  IElectionOperator(const IElectionOperator&) = delete;
  IElectionOperator& operator=(const IElectionOperator&) = delete;
  virtual ~IElectionOperator() = default;

  // See the table above. False: `token` does not hold `key` (its term ended), or a later term
  // proclaimed already; nothing written then. A retry of the same call changes nothing more.
  virtual bool proclaim(std::string_view key, std::string_view token, std::uint64_t term, std::string_view value) = 0;
  virtual LeaderRecord readLeader(std::string_view key) = 0;
  virtual void announce(std::string_view key) = 0;
  virtual std::unique_ptr<ILeaderWatch> watchLeader(std::string_view key) = 0;
};

}  // namespace dlock
