// TestHelpers.h — small checks and tools the server suites share.
//
//   checkEveryLockKeyHasTtl(client)   CHECKs that every dlock lock key (not a :fence counter)
//                                     carries a TTL
//   recovers(op)                      retries `op` while it throws ConnectionError (5 s at most)
//   TempDir                           a fresh directory, removed with everything in it
//   processAlive(pid)                 true while `pid` runs (a zombie does not count)
//   runScript(command)                a script's exit status and first line of output
//   pidsIn(dir, nodes)                the server.pid each of dir/<node> holds (scripts/lib/redis.sh)
//   extendedFlags(results)            the `extended` flag of each of extendAll's results
#pragma once

#include <doctest/doctest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "RedisClient.h"
#include "dlock/IOperator.h"
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

inline bool processAlive(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
}

// Runs `command` through the shell: {exit status (-1 when it could not run), first output line}.
inline std::pair<int, std::string> runScript(const std::string& command) {
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) return {-1, ""};
  char buffer[1024] = {};
  std::string line = std::fgets(buffer, sizeof buffer, out) != nullptr ? buffer : "";
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  const int status = ::pclose(out);
  return {status, line};
}

inline std::vector<bool> extendedFlags(const std::vector<ExtendResult>& results) {
  std::vector<bool> flags;
  flags.reserve(results.size());
  for (const auto& result : results) flags.push_back(result.extended);
  return flags;
}

inline std::vector<pid_t> pidsIn(const std::string& dir, const std::vector<std::string>& nodes) {
  std::vector<pid_t> pids;
  for (const auto& node : nodes) {
    std::ifstream in(dir + "/" + node + "/server.pid");
    pid_t pid = 0;
    if (in >> pid) pids.push_back(pid);
  }
  return pids;
}

}  // namespace dlock::test
