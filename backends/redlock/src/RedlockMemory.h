// SPDX-License-Identifier: Apache-2.0
// RedlockMemory.h — what a Redlock operator remembers between calls, per (key, token):
//
//   suspects           nodes that may still hold the token from an attempt that was undone (its
//                      release not confirmed), and until when: such a node answers "acquired" to a
//                      retry with the same token, but its lease started with the earlier attempt,
//                      so it must not count toward this attempt's quorum
//   partial releases   the nodes that released it in an unlock whose outcome was undecided, so a
//                      retried unlock counts them (their own record may have ended, or never been
//                      written: see ReleaseSource.cpp)
//
// Entries expire; the maps are swept past a few hundred entries. Owner: one RedlockOperator, per
// process (a forked child starts with none). Thread safety: thread-safe.
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

class RedlockMemory {
 public:
  explicit RedlockMemory(std::size_t nodes) : nodes_(nodes) {}
  RedlockMemory(const RedlockMemory&) = delete;
  RedlockMemory& operator=(const RedlockMemory&) = delete;

  // The nodes that may still hold (key, token) at `now`, one flag per node.
  std::vector<bool> suspectsOf(std::string_view key, std::string_view token, std::chrono::steady_clock::time_point now);
  // `nodes` may hold (key, token) until `until`.
  void addSuspects(std::string_view key, std::string_view token, const std::vector<std::size_t>& nodes,
                   std::chrono::steady_clock::time_point until);
  // After a successful acquisition: the earlier attempts' leftovers are ours and no longer matter.
  void forgetSuspects(std::string_view key, std::string_view token);

  // The nodes that released (key, token) in an earlier undecided unlock, one flag per node.
  std::vector<bool> releasedBefore(std::string_view key, std::string_view token);
  // Remembers `released` for a retry (a non-empty vector), or forgets (an empty one).
  void rememberReleased(std::string_view key, std::string_view token, const std::vector<bool>& released);

 private:
  const std::size_t nodes_;
  std::mutex mutex_;
  // Per (key, token): until when each node may still hold it from an undone attempt.
  std::map<std::string, std::vector<std::chrono::steady_clock::time_point>> suspects_;  // guarded by mutex_
  // Per (key, token): the nodes that released it in an undecided unlock, and until when to remember.
  std::map<std::string, std::pair<std::vector<bool>, std::chrono::steady_clock::time_point>>
      partialReleases_;  // guarded by mutex_
};

}  // namespace dlock::detail
