// SPDX-License-Identifier: Apache-2.0
// Suspects.h — per (key, token), the nodes that may still hold the token from an acquisition
// that was undone without its release confirmed there, and until when. Such a node answers
// "acquired" to a retry with the same token, but its lease started with the earlier attempt, so
// it must not count toward the retry's quorum.
// Entries expire; the map is swept past a few hundred entries. Owner: one RedlockOperator, per
// process (a forked child starts with none). Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

class Suspects {
 public:
  explicit Suspects(std::size_t nodes) : nodes_(nodes) {}
  Suspects(const Suspects&) = delete;
  Suspects& operator=(const Suspects&) = delete;

  // The nodes that may still hold (key, token) at `now`, one flag per node.
  std::vector<bool> of(std::string_view key, std::string_view token, std::chrono::steady_clock::time_point now);
  // `nodes` may hold (key, token) until `until`.
  void add(std::string_view key, std::string_view token, const std::vector<std::size_t>& nodes,
           std::chrono::steady_clock::time_point until);
  // After a successful acquisition: the earlier attempts' leftovers are ours and no longer matter.
  void forget(std::string_view key, std::string_view token);

 private:
  const std::size_t nodes_;
  std::mutex mutex_;
  // Per (key, token): until when each node may still hold it.
  std::map<std::string, std::vector<std::chrono::steady_clock::time_point>> until_;  // guarded by mutex_
};

}  // namespace dlock::detail
