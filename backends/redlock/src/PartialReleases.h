// SPDX-License-Identifier: Apache-2.0
// PartialReleases.h — per (key, token), the nodes that released it in an unlock whose outcome
// was undecided (too few answered), so that a retried unlock counts them: their own record of
// the release may have ended, or never been written (see ReleaseSource.cpp).
// Entries expire after a few minutes; the map is swept past a few hundred entries. Owner: one
// RedlockOperator, per process (a forked child starts with none). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dlock::detail {

class PartialReleases {
 public:
  explicit PartialReleases(std::size_t nodes) : nodes_(nodes) {}
  PartialReleases(const PartialReleases&) = delete;
  PartialReleases& operator=(const PartialReleases&) = delete;

  // The nodes that released (key, token) in an earlier undecided unlock, one flag per node.
  std::vector<bool> of(std::string_view key, std::string_view token);
  // Remembers `released` for a retry (a non-empty vector), or forgets (an empty one).
  void remember(std::string_view key, std::string_view token, const std::vector<bool>& released);

 private:
  const std::size_t nodes_;
  std::mutex mutex_;
  // Per (key, token): the nodes that released it, and until when to remember.
  std::map<std::string, std::pair<std::vector<bool>, std::chrono::steady_clock::time_point>> released_;  // guarded by mutex_
};

}  // namespace dlock::detail
