// SPDX-License-Identifier: Apache-2.0
#include "RedlockMemory.h"

#include <algorithm>

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;

// The remembered per-(key, token) node sets are swept of expired entries past this size.
constexpr std::size_t kSweepSize = 256;
// How long an undecided release remembers the nodes that did release, for a retry.
constexpr std::chrono::minutes kPartialReleaseMemory{5};

std::string suspectKey(std::string_view key, std::string_view token) {
  return std::to_string(key.size()) + ":" + std::string(key) + std::string(token);
}

}  // namespace

std::vector<bool> RedlockMemory::suspectsOf(std::string_view key, std::string_view token, Steady::time_point now) {
  std::vector<bool> suspect(nodes_, false);
  std::lock_guard<std::mutex> guard(mutex_);
  if (suspects_.empty()) return suspect;
  const auto it = suspects_.find(suspectKey(key, token));
  if (it == suspects_.end()) return suspect;
  bool any = false;
  for (std::size_t i = 0; i < suspect.size(); ++i) {
    suspect[i] = it->second[i] > now;
    any = any || suspect[i];
  }
  if (!any) suspects_.erase(it);
  return suspect;
}

void RedlockMemory::addSuspects(std::string_view key, std::string_view token, const std::vector<std::size_t>& nodes,
                               Steady::time_point until) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (suspects_.size() >= kSweepSize) {
    const Steady::time_point now = Steady::now();
    for (auto it = suspects_.begin(); it != suspects_.end();) {
      const bool live = std::any_of(it->second.begin(), it->second.end(), [&](auto t) { return t > now; });
      it = live ? std::next(it) : suspects_.erase(it);
    }
  }
  auto& entry = suspects_[suspectKey(key, token)];
  entry.resize(nodes_);
  for (std::size_t node : nodes) entry[node] = std::max(entry[node], until);
}

void RedlockMemory::forgetSuspects(std::string_view key, std::string_view token) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!suspects_.empty()) suspects_.erase(suspectKey(key, token));
}

std::vector<bool> RedlockMemory::releasedBefore(std::string_view key, std::string_view token) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (partialReleases_.empty()) return std::vector<bool>(nodes_, false);
  const auto it = partialReleases_.find(suspectKey(key, token));
  if (it == partialReleases_.end()) return std::vector<bool>(nodes_, false);
  return it->second.first;
}

void RedlockMemory::rememberReleased(std::string_view key, std::string_view token, const std::vector<bool>& released) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (released.empty()) {
    if (!partialReleases_.empty()) partialReleases_.erase(suspectKey(key, token));
    return;
  }
  const Steady::time_point now = Steady::now();
  if (partialReleases_.size() >= kSweepSize) {
    for (auto it = partialReleases_.begin(); it != partialReleases_.end();) {
      it = it->second.second > now ? std::next(it) : partialReleases_.erase(it);
    }
  }
  partialReleases_[suspectKey(key, token)] = {released, now + kPartialReleaseMemory};
}

}  // namespace dlock::detail
