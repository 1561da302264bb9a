// SPDX-License-Identifier: Apache-2.0
#include "MemoryCondition.h"

#include <algorithm>

namespace dlock::detail {
namespace {

bool lives(const MemoryConditions::Waiter& waiter, Clock::time_point now) { return waiter.leaseEnds > now; }

template <class Waiters>
auto placeOfToken(Waiters& waiters, std::string_view token) {
  return std::find_if(waiters.begin(), waiters.end(), [&](const MemoryConditions::Waiter& w) { return w.token == token; });
}

}  // namespace

const MemoryConditions::Waiters* MemoryConditions::find(std::string_view key, std::string_view name) const {
  const auto it = conditions_.find(Name(key, name));
  return it == conditions_.end() ? nullptr : &it->second;
}

MemoryConditions::Waiters* MemoryConditions::find(std::string_view key, std::string_view name) {
  const auto it = conditions_.find(Name(key, name));
  return it == conditions_.end() ? nullptr : &it->second;
}

void MemoryConditions::dropIfEmpty(std::string_view key, std::string_view name) {
  const auto it = conditions_.find(Name(key, name));
  if (it != conditions_.end() && it->second.empty()) conditions_.erase(it);
}

std::uint32_t MemoryConditions::placeOf(std::string_view key, std::string_view name, std::string_view token,
                                        Clock::time_point now) const {
  const Waiters* waiters = find(key, name);
  if (waiters == nullptr) return 0;
  const auto it = placeOfToken(*waiters, token);
  if (it == waiters->end() || !lives(*it, now)) return 0;
  return static_cast<std::uint32_t>(it - waiters->begin()) + 1;
}

std::uint32_t MemoryConditions::join(std::string_view key, std::string_view name, Waiter waiter,
                                     Clock::time_point now) {
  Waiters& waiters = conditions_[Name(key, name)];
  waiters.erase(std::remove_if(waiters.begin(), waiters.end(),
                               [&](const Waiter& w) { return !lives(w, now) || w.token == waiter.token; }),
                waiters.end());
  waiters.push_back(std::move(waiter));
  return static_cast<std::uint32_t>(waiters.size());
}

std::vector<MemoryConditions::Waiter> MemoryConditions::take(std::string_view key, std::string_view name, bool all,
                                                             Clock::time_point now) {
  std::vector<Waiter> taken;
  Waiters* waiters = find(key, name);
  if (waiters == nullptr) return taken;
  while (!waiters->empty() && (all || taken.empty())) {
    Waiter head = std::move(waiters->front());
    waiters->pop_front();
    if (lives(head, now)) taken.push_back(std::move(head));
  }
  dropIfEmpty(key, name);
  return taken;
}

bool MemoryConditions::renew(std::string_view key, std::string_view name, std::string_view token,
                             Clock::time_point leaseEnds, Clock::time_point now) {
  Waiters* waiters = find(key, name);
  if (waiters == nullptr) return false;
  const auto it = placeOfToken(*waiters, token);
  if (it == waiters->end()) return false;
  if (lives(*it, now)) {
    it->leaseEnds = leaseEnds;
    return true;
  }
  waiters->erase(it);
  dropIfEmpty(key, name);
  return false;
}

bool MemoryConditions::leave(std::string_view key, std::string_view name, std::string_view token,
                             Clock::time_point now) {
  Waiters* waiters = find(key, name);
  if (waiters == nullptr) return false;
  const auto it = placeOfToken(*waiters, token);
  if (it == waiters->end()) return false;
  const bool waiting = lives(*it, now);
  waiters->erase(it);
  dropIfEmpty(key, name);
  return waiting;
}

std::vector<MemoryConditions::Waiter> MemoryConditions::live(std::string_view key, std::string_view name,
                                                             Clock::time_point now) const {
  std::vector<Waiter> waiting;
  if (const Waiters* waiters = find(key, name)) {
    std::copy_if(waiters->begin(), waiters->end(), std::back_inserter(waiting),
                 [&](const Waiter& w) { return lives(w, now); });
  }
  return waiting;
}

}  // namespace dlock::detail
