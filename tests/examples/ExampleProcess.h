// SPDX-License-Identifier: Apache-2.0
// ExampleProcess.h — runs an example program for the example tests: a ChildProcess with stdout
// and stderr together in a temporary file. wait() reaps it; one that outlives its time limit is
// killed and reported. The destructor kills and reaps a child still running, so a failing test
// leaves no process behind.
// Owner: the test. Thread safety: not thread-safe.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ChildProcess.h"
#include "TestHelpers.h"

namespace dlock::test {

struct Finished {
  int exitCode = -1;   // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr, interleaved
};

class ExampleProcess {
 public:
  explicit ExampleProcess(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env = {})
      : directory_(std::make_unique<TempDir>()),
        child_(std::make_unique<ChildProcess>(ChildProcess::Options{argv, env, directory_->file("output"), false})) {}

  // Waits for the child to end; past `limit` it is killed and the output says so.
  Finished wait(std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    if (!child_) throw std::logic_error("ExampleProcess: already waited for");
    std::optional<int> code = child_->waitFor(limit);
    const bool timedOut = !code;
    if (timedOut) {
      child_->signal(SIGKILL);
      code = child_->wait();
    }
    child_.reset();
    Finished finished;
    finished.exitCode = *code;
    std::ifstream in(directory_->file("output"));
    std::ostringstream text;
    text << in.rdbuf();
    finished.output = text.str();
    if (timedOut) finished.output += "\n[killed: still running after " + std::to_string(limit.count()) + " ms]\n";
    return finished;
  }

 private:
  std::unique_ptr<TempDir> directory_;  // destroyed after the child
  std::unique_ptr<ChildProcess> child_;
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
