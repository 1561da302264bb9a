// SPDX-License-Identifier: Apache-2.0
// ForkedChild.h — a fork() without exec: the child runs a function on its copy of this process
// (objects of the test included) and _exits with what it returned, running no destructor and no
// atexit handler of the parent's. For tests of what objects inherited across fork() do.
// Not thread-safe.
#pragma once

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <exception>
#include <functional>
#include <stdexcept>
#include <thread>

namespace dlock::test {

class ForkedChild {
 public:
  // What exitStatus() gives for a child still running when its budget ran out (it is killed).
  static constexpr int kHung = -1;

  // Forks; the child runs `body` and exits with its result (97 when it threw, after printing the
  // message to stderr).
  explicit ForkedChild(const std::function<int()>& body) {
    (void)::fflush(nullptr);  // or the child would print the parent's buffered output again
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      int status = 97;
      try {
        status = body();
      } catch (const std::exception& error) {
        (void)::fprintf(stderr, "forked child: %s\n", error.what());
      } catch (...) {
        (void)::fprintf(stderr, "forked child: unknown exception\n");
      }
      (void)::fflush(nullptr);
      ::_exit(status);
    }
  }
  ForkedChild(const ForkedChild&) = delete;
  ForkedChild& operator=(const ForkedChild&) = delete;
  ~ForkedChild() {
    if (pid_ > 0) {
      (void)::kill(pid_, SIGKILL);
      (void)::waitpid(pid_, nullptr, 0);
    }
  }

  // Waits for the child's exit, at most `budget`: its exit status (128 + the signal when killed
  // by one), or kHung after killing a child still running then (`onHang` sees it first, alive).
  int exitStatus(std::chrono::milliseconds budget, const std::function<void(pid_t)>& onHang = {}) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    while (pid_ > 0) {
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        if (onHang) onHang(pid_);
        (void)::kill(pid_, SIGKILL);
        (void)::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return kHung;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return kHung;
  }

  [[nodiscard]] pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

}  // namespace dlock::test
