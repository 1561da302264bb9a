// SPDX-License-Identifier: Apache-2.0
// Supervisor.h — runs COMMAND as dlock's child and watches it: passes SIGINT, SIGTERM and SIGHUP
// on to it, stops it when the lease is lost, and reports how it ended.
//
// The forwarded signals and SIGCHLD are blocked in every thread and read from a signalfd by one
// loop (Linux), so construct the Supervisor before any thread starts: threads inherit the mask,
// and the watchdog and subscriber threads of the lock must not take these signals. The lease-lost
// notice arrives from the watchdog thread through a pipe, into the same loop.
//
// The child gets the signal mask and SIGPIPE disposition dlock started with (dlock's library
// ignores SIGPIPE for itself), and the descriptors dlock inherited, as flock(1) passes them on.
// Those dlock opens itself are all close-on-exec: the Redis connections (the library sets it),
// the signalfd and the pipe. The child never outlives dlock: it gets kDeathSignal when dlock
// ends, however it ends (Linux PR_SET_PDEATHSIG).
// Owner: main(). Thread safety: notifyLost() from any thread; everything else from the thread
// that constructed it, which must live as long as dlock (main's): the death signal comes when
// the thread that forked the child ends.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace dlock::cli {

class Supervisor {
 public:
  // How a supervised command ended.
  struct Outcome {
    int status = 0;       // its exit status, or 128 + N when killed by signal N
    int signal = 0;       // N when killed by signal N, else 0
    bool lost = false;    // the lease was reported lost while it ran
    // Stopped by dlock because its lease was ending unrenewed (Callbacks::leaseDeadline): it did
    // not finish under the lock, lost or not.
    bool stoppedAtLeaseEnd = false;
  };

  struct Callbacks {
    // The lease was lost (once); before the command is stopped.
    std::function<void(std::uint64_t fencingToken)> onLost;
    // The lease's local deadline now (it moves with each renewal); unset: none is watched. With
    // `terminate`, the command gets SIGTERM at the deadline minus the grace period and SIGKILL at
    // the deadline, so it never runs past the lease, even when no loss was reported yet (renewals
    // that keep failing end the lease there).
    std::function<std::chrono::steady_clock::time_point()> leaseDeadline;
    std::chrono::milliseconds leaseTime{0};  // the lease a renewal grants
    // The deadline is near (before the SIGTERM it brings).
    std::function<void(std::chrono::steady_clock::time_point deadline)> onDeadline;
    // Called about every `tickEvery` while the command runs (zero: never).
    std::function<void()> onTick;
    std::chrono::milliseconds tickEvery{0};
  };

  // What the command gets when dlock ends before it (killed, crashed): SIGKILL, because nobody is
  // left to renew the lease or to follow a SIGTERM with SIGKILL after the grace period.
  static constexpr int kDeathSignal = SIGKILL;

  // The failure of spawn(): the errno of exec or fork.
  struct SpawnError {
    int error = 0;
  };

  Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;
  ~Supervisor();

  // The lease is gone. Any thread; async-signal-safe (one write to a pipe).
  void notifyLost(std::uint64_t fencingToken) noexcept;

  // A SIGINT, SIGTERM or SIGHUP received so far (while waiting for the lock), without blocking.
  [[nodiscard]] std::optional<int> takeInterrupt();
  // The same, waiting for one for at most `timeout`: a pause that a signal cuts short.
  [[nodiscard]] std::optional<int> waitForInterrupt(std::chrono::milliseconds timeout);

  // Starts the command (PATH search as execvp), to get kDeathSignal if dlock ends first. The pid,
  // or the errno of a failed start.
  [[nodiscard]] pid_t spawn(const std::vector<std::string>& command, SpawnError& error);

  // Runs until the child `pid` exits. On a lost lease: callbacks.onLost, then, when `terminate`,
  // SIGTERM and SIGKILL `grace` later, or at the lease's deadline if that comes first; and at the
  // lease's deadline minus `grace` (at most a third of the lease left) SIGTERM anyway.
  [[nodiscard]] Outcome supervise(pid_t pid, bool terminate, std::chrono::milliseconds grace,
                                  const Callbacks& callbacks);

  // Ends dlock by `signo` with its default action (so a parent shell sees the signal); falls back
  // to exit(128 + signo) if that did not end the process.
  [[noreturn]] static void dieBySignal(int signo);

 private:
  sigset_t startMask_{};  // the signal mask dlock started with
  bool pipeIgnoredAtStart_ = false;
  int signalFd_ = -1;
  int lostRead_ = -1;
  int lostWrite_ = -1;
};

}  // namespace dlock::cli
