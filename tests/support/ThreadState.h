// SPDX-License-Identifier: Apache-2.0
// ThreadState.h — what /proc says of a thread: whether it sleeps, and how often it has blocked.
// For tests that a waiter is woken by its own event only, not by every event around it, and
// that count the threads of a kind (by the name a thread gave itself).
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace dlock::test {

// The calling thread's voluntary context switches: each time it blocked, a wait woken for nothing
// included.
inline long long voluntarySwitches() {
  std::ifstream status("/proc/thread-self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stoll(line.substr(line.find(':') + 1));
  }
  throw std::runtime_error("no voluntary_ctxt_switches in /proc/thread-self/status");
}

// True while thread `tid` of this process sleeps (state S in its stat).
inline bool threadSleeping(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'S';
}

// The threads of this process named `name` now (pthread_setname_np; /proc/self/task/*/comm).
inline int threadsNamed(const std::string& name) {
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) throw std::runtime_error("cannot list /proc/self/task");
  int count = 0;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream comm(std::string("/proc/self/task/") + entry->d_name + "/comm");
    std::string text;
    if (std::getline(comm, text) && text == name) ++count;
  }
  ::closedir(tasks);
  return count;
}

}  // namespace dlock::test
