// SPDX-License-Identifier: Apache-2.0
// TestHelpers.h — small checks and tools the server suites share.
//
//   checkEveryLockKeyHasTtl(client)   CHECKs that every dlock key (locks, fencing counters,
//                                     release records) carries a TTL
//   kEventBudget                      how long to wait for an event that takes milliseconds
//   eventually(condition[, budget])   polls `condition` until it holds; false when the budget ran out
//   onceRecovered(op), recovers(op)   retry `op` while it throws ConnectionError (kEventBudget)
//   infoField(client, field)          a field of the server's INFO ("loading", "master_link_status")
//   releaseSubscribers(client, key)   subscribers of a key's release and wake-up channels (waiters asleep)
//   waiterRegistered(client, key)     some waiter's try registered it for the key's next wake-up
//   serverNow(client)                 the server's clock (TIME) in ms
//   commandsSent(client)              server calls so far (commandstats) but the tests' own look-ups
//   inNanosleep(pid)                  true while the main thread of `pid` sleeps in nanosleep
//   TempDir                           a fresh directory, removed with everything in it
//   processState(pid)                 the state letter of `pid` ('T' once a SIGSTOP took hold)
//   processAlive(pid)                 true while `pid` runs (a zombie does not count)
//   runScript(command)                a script's exit status and first line of output
//   pidsIn(dir, nodes)                the server.pid each of dir/<node> holds (scripts/lib/redis.sh)
//   extendedFlags(results)            the `extended` flag of each of extendAll's results
#pragma once

#include <doctest/doctest.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "RedisClient.h"
#include "dlock/IOperator.h"
#include "dlock/LockError.h"

namespace dlock::test {

// PTTL -1 is a key without a TTL; -2 a key that expired (or was released) after KEYS listed it,
// as short-lived release records do while the check runs on a slow build.
inline void checkEveryLockKeyHasTtl(RedisClient& client, const std::string& prefix = "dlock:") {
  for (const auto& key : client.ok({"KEYS", prefix + "*"}).elements) {
    CHECK_MESSAGE(client.ok({"PTTL", key.str}).integer != -1, "no TTL on " << key.str);
  }
}

// The budget for an event that takes milliseconds on an idle machine: a thread or process
// starting, a subscription, a reconnect after the fault is over (the client's back-off is capped at
// 1 s, RedisOptions::maxReconnectBackoff). A sanitizer build on a busy machine stretches these to
// seconds; only an event that never comes reaches this.
inline constexpr std::chrono::seconds kEventBudget{30};

// Polls `condition` every 10 ms; false when `budget` passed first.
template <class Condition>
bool eventually(Condition&& condition, std::chrono::milliseconds budget = kEventBudget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// Retries `operation` while it throws ConnectionError (the fault is not over, or the client is
// still backing off), for at most `budget`; returns what it returned once it ran through, and
// rethrows the last ConnectionError when the budget ran out. Call it once the fault has ended: it
// waits for the client, not the fault.
template <class Operation>
auto onceRecovered(Operation&& operation, std::chrono::milliseconds budget = kEventBudget) -> decltype(operation()) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (true) {
    try {
      return operation();
    } catch (const ConnectionError&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

// onceRecovered() for an operation that says whether it went through: false when the budget ran out.
template <class Operation>
bool recovers(Operation&& operation, std::chrono::milliseconds budget = kEventBudget) {
  try {
    return onceRecovered(std::forward<Operation>(operation), budget);
  } catch (const ConnectionError&) {
    return false;
  }
}

// The value of `field` in the server's INFO (all sections), "" when it has none.
inline std::string infoField(RedisClient& client, const std::string& field) {
  const std::string info = client.ok({"INFO", "everything"}).str;
  const std::string prefix = field + ":";
  for (std::size_t at = 0; at < info.size();) {
    const auto end = info.find("\r\n", at);
    const std::string line = info.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    if (end == std::string::npos) break;
    at = end + 2;
  }
  return "";
}

// How many clients subscribe to the release channel of dlock key `key`: a waiter asleep on the
// release message is one of them.
// A waiter of the default lock asleep for `key`: it listens (releaseSubscribers) and its last try
// registered it in the key's waiter registry (`<prefix>{key}:waiters`, `listener=expiry;` each,
// `listener=expiry~;` once woken and not yet tried again), so a release now wakes it.
inline bool waiterRegistered(RedisClient& client, const std::string& key, const std::string& prefix = "dlock:") {
  const std::string text = client.ok({"GET", prefix + "{" + key + "}:waiters"}).str;
  for (std::size_t at = text.find(';'); at != std::string::npos; at = text.find(';', at + 1)) {
    if (at > 0 && text[at - 1] != '~') return true;
  }
  return false;
}

// The release channel and each waiting operator's wake-up channel (`...:released:<listener>`).
inline long long releaseSubscribers(RedisClient& client, const std::string& key,
                                    const std::string& prefix = "dlock:") {
  const std::string channel = prefix + "{" + key + "}:released";
  std::vector<std::string> command = {"PUBSUB", "NUMSUB", channel};
  for (const auto& wake : client.ok({"PUBSUB", "CHANNELS", channel + ":*"}).elements) command.push_back(wake.str);
  long long subscribers = 0;
  const Reply reply = client.ok(command);
  for (std::size_t i = 1; i < reply.elements.size(); i += 2) subscribers += reply.elements[i].integer;
  return subscribers;
}

// The server's clock in ms.
inline long long serverNow(RedisClient& client) {
  const auto time = client.ok({"TIME"});
  return std::stoll(time.elements[0].str) * 1000 + std::stoll(time.elements[1].str) / 1000;
}

// Calls of every command (scripts' own included) but the tests' own look-ups (INFO, CONFIG, PING).
inline long long commandsSent(RedisClient& client) {
  long long total = 0;
  for (const auto& [command, calls] : client.commandCalls()) {
    if (command != "info" && command != "config" && command != "ping") total += calls;
  }
  return total;
}

// True while the main thread of `pid` is in nanosleep or clock_nanosleep: a redis-server running
// DEBUG SLEEP, as opposed to one waiting in epoll for commands.
inline bool inNanosleep(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
  std::string first;  // the syscall number, or "running" when the thread is on a CPU
  if (!(in >> first)) throw std::runtime_error("cannot read /proc/" + std::to_string(pid) + "/syscall");
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) return false;
  const long number = std::stol(first);
#ifdef SYS_nanosleep
  if (number == SYS_nanosleep) return true;
#endif
  return number == SYS_clock_nanosleep;
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

// The state letter of `pid` in /proc/<pid>/stat ('R', 'S', 'T' when stopped, 'Z'); '?' when gone.
inline char processState(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return '?';
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
}

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
