// SPDX-License-Identifier: Apache-2.0
// Workers.h — worker processes for the multi-process benchmarks: this same program started again
// as `<program> --worker <args...>`, and waited for.
#pragma once

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::bench {

// Starts `/proc/self/exe --worker args...` (argv[0] is `program`); returns its pid.
inline pid_t spawnWorker(const char* program, const std::vector<std::string>& args) {
  // Built before fork: the child only execs.
  std::vector<std::string> all = {program, "--worker"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : all) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::execv("/proc/self/exe", argv.data());
    ::_exit(127);
  }
  return pid;
}

// Waits for every worker; true when all exited with status 0.
inline bool waitForWorkers(const std::vector<pid_t>& pids) {
  bool ok = true;
  for (const pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  return ok;
}

}  // namespace dlock::bench
