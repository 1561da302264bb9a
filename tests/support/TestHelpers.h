// TestHelpers.h — small checks and tools the server suites share.
//
//   checkEveryLockKeyHasTtl(client)   CHECKs that every dlock lock key (not a :fence counter)
//                                     carries a TTL
//   recovers(op)                      retries `op` while it throws ConnectionError (5 s at most)
//   TempDir                           a fresh directory, removed with everything in it
#pragma once

#include <doctest/doctest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "RedisClient.h"
#include "dlock/LockError.h"

namespace dlock::test {

inline void checkEveryLockKeyHasTtl(RedisClient& client, const std::string& prefix = "dlock:") {
  for (const auto& key : client.ok({"KEYS", prefix + "{*"}).elements) {
    if (key.str.size() >= 6 && key.str.compare(key.str.size() - 6, 6, ":fence") == 0) continue;
    CHECK_MESSAGE(client.ok({"PTTL", key.str}).integer > 0, "no TTL on " << key.str);
  }
}

// Retries `operation` while it throws ConnectionError (the fault is not over), for at most
// `budget`; returns what it returned once it ran through, false when the budget ran out.
template <class Operation>
bool recovers(Operation&& operation, std::chrono::milliseconds budget = std::chrono::seconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      return operation();
    } catch (const ConnectionError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return false;
}

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/dlock-test-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace dlock::test
