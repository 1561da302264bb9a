// ExampleProcess.h — runs a program as a child process for the example tests: argv (no shell),
// extra environment variables, stdout and stderr together in a temporary file. wait() reaps it;
// one that outlives its time limit is killed and reported. The destructor kills and reaps a
// child still running, so a failing test leaves no process behind.
// Owner: the test. Thread safety: not thread-safe.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;

namespace dlock::test {

struct Finished {
  int exitCode = -1;   // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr, interleaved
};

class ExampleProcess {
 public:
  explicit ExampleProcess(const std::vector<std::string>& argv,
                        const std::vector<std::pair<std::string, std::string>>& env = {}) {
    char pattern[] = "/tmp/dlock-example-output-XXXXXX";
    const int fd = ::mkstemp(pattern);
    if (fd < 0) throw std::runtime_error(std::string("mkstemp: ") + std::strerror(errno));
    ::close(fd);
    outputPath_ = pattern;

    std::vector<std::string> environment;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      const std::string text = *entry;
      bool replaced = false;
      for (const auto& [name, value] : env) replaced = replaced || text.rfind(name + "=", 0) == 0;
      if (!replaced) environment.push_back(text);
    }
    for (const auto& [name, value] : env) environment.push_back(name + "=" + value);

    std::vector<char*> args, envp;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    for (const auto& entry : environment) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, outputPath_.c_str(), O_WRONLY | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    const int error = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (error != 0) {
      std::remove(outputPath_.c_str());
      throw std::runtime_error("cannot run " + argv.front() + ": " + std::strerror(error));
    }
  }
  ExampleProcess(const ExampleProcess&) = delete;
  ExampleProcess& operator=(const ExampleProcess&) = delete;
  ExampleProcess(ExampleProcess&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)), outputPath_(std::move(other.outputPath_)) {}
  ExampleProcess& operator=(ExampleProcess&&) = delete;
  ~ExampleProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (!outputPath_.empty()) std::remove(outputPath_.c_str());
  }

  // Waits for the child to end; past `limit` it is killed and the output says so.
  Finished wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    Finished finished;
    if (pid_ <= 0) throw std::logic_error("ExampleProcess: already waited for");
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    bool timedOut = false;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        timedOut = true;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    finished.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream in(outputPath_);
    std::ostringstream text;
    text << in.rdbuf();
    finished.output = text.str();
    if (timedOut) finished.output += "\n[killed: still running after " + std::to_string(limit.count()) + " ms]\n";
    return finished;
  }

 private:
  pid_t pid_ = -1;
  std::string outputPath_;
};

// Runs a program to its end.
inline Finished run(const std::vector<std::string>& argv,
                    const std::vector<std::pair<std::string, std::string>>& env = {}) {
  return ExampleProcess(argv, env).wait();
}

// The number after " name=" in a program's RESULT line; -1 when absent.
inline long long resultField(const std::string& output, const std::string& name) {
  const auto line = output.find("RESULT ");
  if (line == std::string::npos) return -1;
  const auto at = output.find(" " + name + "=", line);
  if (at == std::string::npos || at > output.find('\n', line)) return -1;
  return std::atoll(output.c_str() + at + name.size() + 2);
}

}  // namespace dlock::test
