// SPDX-License-Identifier: Apache-2.0
// ThreadState.h — what /proc says of a thread: whether it sleeps, and how often it has blocked.
// For tests that a waiter is woken by its own event only, not by every event around it.
#pragma once

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

}  // namespace dlock::test
