// SPDX-License-Identifier: Apache-2.0
// MemoryCondition.h — the memory operator's conditions (IConditionOperator): per key and condition
// name, the waiters in arrival order, each with its waiter lease on the operator's clock. The
// memory twin of ConditionScripts.h's two keys; the operator applies the rest (the release, the
// move into the fair queue, the signal to a watch) to its keys in the same step, under its mutex.
// Owner: one MemoryOperator's state. Thread safety: not thread-safe (the operator's mutex guards it).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/Clock.h"

namespace dlock::detail {

class MemoryConditions {
 public:
  struct Waiter {
    std::string token;
    std::chrono::milliseconds ttl;  // the lease it gets when a fair key is handed to it
    Clock::time_point leaseEnds;    // its waiter lease
  };

  // The place of `token` (1 is the longest waiter) while its lease lasts; 0 otherwise.
  [[nodiscard]] std::uint32_t placeOf(std::string_view key, std::string_view name, std::string_view token,
                                      Clock::time_point now) const;
  // Joins the tail, once the places that ended by `now` are dropped; returns the place.
  std::uint32_t join(std::string_view key, std::string_view name, Waiter waiter, Clock::time_point now);
  // Takes the longest live waiter off (every live one, in order, when `all`); ended places go too.
  std::vector<Waiter> take(std::string_view key, std::string_view name, bool all, Clock::time_point now);
  // True when `token` was waiting: its place now lasts until `leaseEnds`. An ended place is dropped.
  bool renew(std::string_view key, std::string_view name, std::string_view token, Clock::time_point leaseEnds,
             Clock::time_point now);
  // Out of the condition; true when `token` was waiting.
  bool leave(std::string_view key, std::string_view name, std::string_view token, Clock::time_point now);
  // The live waiters, longest first.
  [[nodiscard]] std::vector<Waiter> live(std::string_view key, std::string_view name, Clock::time_point now) const;
  // Forgets every waiter (a server restarted empty).
  void clear() { conditions_.clear(); }

 private:
  using Waiters = std::deque<Waiter>;
  using Name = std::pair<std::string, std::string>;  // key, condition name
  [[nodiscard]] const Waiters* find(std::string_view key, std::string_view name) const;
  Waiters* find(std::string_view key, std::string_view name);
  // Drops `waiters` when empty: a condition nobody waits on takes no memory (as its keys vanish).
  void dropIfEmpty(std::string_view key, std::string_view name);

  std::map<Name, Waiters> conditions_;
};

}  // namespace dlock::detail
