// SPDX-License-Identifier: Apache-2.0
// ChildProcess.h — another process for multi-process tests (fork/exec, not threads), with its
// stdin and stdout as line-oriented pipes (or its output in a file), extra environment, and a
// bounded wait. Killed (SIGKILL) and reaped on destruction if still
// running. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dlock::test {

class ChildProcess {
 public:
  struct Options {
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env;  // set in the child's environment
    // When set, stdout and stderr are appended to this file instead of stdout going to the pipe
    // (readLine then sees nothing).
    std::string outputFile;
    bool searchPath = false;  // look argv[0] up in PATH
  };

  explicit ChildProcess(const std::vector<std::string>& argv) : ChildProcess(Options{argv, {}, {}, false}) {}
  explicit ChildProcess(const Options& options);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  void writeLine(const std::string& line);
  // The next line of output, or nullopt at EOF or after `timeout`.
  // The default is generous: a child on a busy machine may take seconds to start and answer.
  std::optional<std::string> readLine(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  void signal(int signo);
  // Waits for the exit; returns the exit status (128 + signal when killed).
  int wait();
  // Waits at most `budget`: the exit status as wait() gives it, or nullopt while still running.
  std::optional<int> waitFor(std::chrono::milliseconds budget);
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int toChild_ = -1;
  int fromChild_ = -1;
  std::string buffer_;
};

}  // namespace dlock::test
