// ChildProcess.h — another process for multi-process tests (fork/exec, not threads), with its
// stdin and stdout as line-oriented pipes. Killed (SIGKILL) and reaped on destruction if still
// running. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace dlock::test {

class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv);
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  void writeLine(const std::string& line);
  // The next line of output, or nullopt at EOF or after `timeout`.
  std::optional<std::string> readLine(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void signal(int signo);
  // Waits for the exit; returns the exit status (128 + signal when killed).
  int wait();
  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int toChild_ = -1;
  int fromChild_ = -1;
  std::string buffer_;
};

}  // namespace dlock::test
