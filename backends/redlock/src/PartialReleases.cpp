// SPDX-License-Identifier: Apache-2.0
#include "PartialReleases.h"

#include "MemoryKey.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;

// The map is swept of expired entries past this size.
constexpr std::size_t kSweepSize = 256;
// How long an undecided release remembers the nodes that did release, for a retry.
constexpr std::chrono::minutes kMemory{5};

}  // namespace

std::vector<bool> PartialReleases::of(std::string_view key, std::string_view token) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (released_.empty()) return std::vector<bool>(nodes_, false);
  const auto it = released_.find(memoryKey(key, token));
  if (it == released_.end()) return std::vector<bool>(nodes_, false);
  return it->second.first;
}

void PartialReleases::remember(std::string_view key, std::string_view token, const std::vector<bool>& released) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (released.empty()) {
    if (!released_.empty()) released_.erase(memoryKey(key, token));
    return;
  }
  const Steady::time_point now = Steady::now();
  if (released_.size() >= kSweepSize) {
    for (auto it = released_.begin(); it != released_.end();) {
      it = it->second.second > now ? std::next(it) : released_.erase(it);
    }
  }
  released_[memoryKey(key, token)] = {released, now + kMemory};
}

}  // namespace dlock::detail
