// SPDX-License-Identifier: Apache-2.0
#include "Suspects.h"

#include <algorithm>

#include "MemoryKey.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;

// The map is swept of expired entries past this size.
constexpr std::size_t kSweepSize = 256;

}  // namespace

std::vector<bool> Suspects::of(std::string_view key, std::string_view token, Steady::time_point now) {
  std::vector<bool> suspect(nodes_, false);
  std::lock_guard<std::mutex> guard(mutex_);
  if (until_.empty()) return suspect;
  const auto it = until_.find(memoryKey(key, token));
  if (it == until_.end()) return suspect;
  bool any = false;
  for (std::size_t i = 0; i < suspect.size(); ++i) {
    suspect[i] = it->second[i] > now;
    any = any || suspect[i];
  }
  if (!any) until_.erase(it);
  return suspect;
}

void Suspects::add(std::string_view key, std::string_view token, const std::vector<std::size_t>& nodes,
                   Steady::time_point until) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (until_.size() >= kSweepSize) {
    const Steady::time_point now = Steady::now();
    for (auto it = until_.begin(); it != until_.end();) {
      const bool live = std::any_of(it->second.begin(), it->second.end(), [&](auto t) { return t > now; });
      it = live ? std::next(it) : until_.erase(it);
    }
  }
  auto& entry = until_[memoryKey(key, token)];
  entry.resize(nodes_);
  for (std::size_t node : nodes) entry[node] = std::max(entry[node], until);
}

void Suspects::forget(std::string_view key, std::string_view token) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!until_.empty()) until_.erase(memoryKey(key, token));
}

}  // namespace dlock::detail
