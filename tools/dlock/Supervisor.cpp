// SPDX-License-Identifier: Apache-2.0
#include "Supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>
#include <vector>

extern char** environ;

namespace dlock::cli {
namespace {

using Steady = std::chrono::steady_clock;

[[noreturn]] void throwErrno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

// The signals dlock passes on to the command.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

sigset_t supervisedSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (const int signo : kForwarded) sigaddset(&set, signo);
  sigaddset(&set, SIGCHLD);
  return set;
}

// Where execvp would look for `file`: itself when it names a path, else each $PATH entry
// (an empty one is the current directory; no $PATH: glibc's default).
std::vector<std::string> executableCandidates(const std::string& file) {
  if (file.find('/') != std::string::npos) return {file};
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "/bin:/usr/bin";
  std::vector<std::string> candidates;
  std::size_t start = 0;
  for (;;) {
    const auto colon = dirs.find(':', start);
    const std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    candidates.push_back(dir.empty() ? file : dir + "/" + file);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return candidates;
}

}  // namespace

Supervisor::Supervisor() {
  const sigset_t blocked = supervisedSignals();
  if (const int error = ::pthread_sigmask(SIG_BLOCK, &blocked, &startMask_); error != 0) {
    throw std::system_error(error, std::generic_category(), "pthread_sigmask");
  }
  // The library ignores SIGPIPE once it connects (a write to a Redis connection the server
  // closed fails with EPIPE instead of ending dlock and orphaning the command); the command gets
  // SIGPIPE as dlock had it at start.
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0) throwErrno("sigaction SIGPIPE");
  pipeIgnoredAtStart_ = current.sa_handler == SIG_IGN;

  signalFd_ = ::signalfd(-1, &blocked, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signalFd_ < 0) throwErrno("signalfd");
  int lost[2];
  if (::pipe2(lost, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(signalFd_);
    throwErrno("pipe2");
  }
  lostRead_ = lost[0];
  lostWrite_ = lost[1];
}

Supervisor::~Supervisor() {
  ::close(lostRead_);
  ::close(lostWrite_);
  ::close(signalFd_);
}

void Supervisor::notifyLost(std::uint64_t fencingToken) noexcept {
  // A full pipe already holds a notice; one is enough.
  [[maybe_unused]] const ssize_t written = ::write(lostWrite_, &fencingToken, sizeof fencingToken);
}

std::optional<int> Supervisor::takeInterrupt() {
  std::optional<int> first;
  signalfd_siginfo info{};
  while (::read(signalFd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    if (info.ssi_signo != SIGCHLD && !first) first = static_cast<int>(info.ssi_signo);
  }
  return first;
}

std::optional<int> Supervisor::waitForInterrupt(std::chrono::milliseconds timeout) {
  const Steady::time_point until = Steady::now() + timeout;
  for (;;) {
    if (std::optional<int> signo = takeInterrupt()) return signo;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - Steady::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd fds{signalFd_, POLLIN, 0};
    if (::poll(&fds, 1, static_cast<int>(std::min<decltype(left)>(left, 60'000))) < 0 && errno != EINTR) {
      throwErrno("poll");
    }
  }
}

pid_t Supervisor::spawn(const std::vector<std::string>& command, SpawnError& error) {
  // Everything the child needs is made here, before fork: dlock has threads (watchdog,
  // subscriber), so between fork and exec the child may only make async-signal-safe calls (and
  // fork runs the library's pthread_atfork child handlers there: they must stay so too).
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> paths = executableCandidates(command.front());
  const pid_t supervisor = ::getpid();
  // The child reports a failed exec on this pipe; a successful one closes it (close-on-exec).
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) throwErrno("pipe2");

  const pid_t pid = ::fork();
  if (pid < 0) {
    error.error = errno;
    ::close(report[0]);
    ::close(report[1]);
    return -1;
  }
  if (pid == 0) {
    ::close(report[0]);
    // kDeathSignal when dlock ends (Supervisor.h says why). It comes when the thread that forked
    // ends, not the process: spawn() runs on main's thread, which lives as long as dlock.
    ::prctl(PR_SET_PDEATHSIG, kDeathSignal);
    // dlock may have died before prctl: then the child already belongs to another parent.
    if (::getppid() != supervisor) ::raise(kDeathSignal);
    // The signal mask dlock started with, and SIGPIPE's default unless the caller had it ignored.
    ::pthread_sigmask(SIG_SETMASK, &startMask_, nullptr);
    if (!pipeIgnoredAtStart_) {
      struct sigaction defaults {};
      defaults.sa_handler = SIG_DFL;
      ::sigaction(SIGPIPE, &defaults, nullptr);
    }
    // The PATH search of execvp: the first candidate that runs; past one that is missing or not
    // executable to the next, and EACCES from any of them wins over "not found", as there.
    const auto searchGoesOn = [](int code) {
      return code == EACCES || code == ENOENT || code == ENOTDIR || code == ESTALE || code == ENODEV ||
             code == ETIMEDOUT;
    };
    int failure = ENOENT;
    bool denied = false;
    for (const auto& path : paths) {
      ::execve(path.c_str(), argv.data(), environ);
      failure = errno;
      denied = denied || failure == EACCES;
      if (!searchGoesOn(failure)) break;
    }
    if (denied && searchGoesOn(failure)) failure = EACCES;
    [[maybe_unused]] const ssize_t written = ::write(report[1], &failure, sizeof failure);
    ::_exit(127);
  }

  ::close(report[1]);
  int failure = 0;
  ssize_t got = 0;
  do {
    got = ::read(report[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  ::close(report[0]);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    ::waitpid(pid, nullptr, 0);
    error.error = failure;
    return -1;
  }
  return pid;
}

Supervisor::Outcome Supervisor::supervise(pid_t pid, bool terminate, std::chrono::milliseconds grace,
                                          const Callbacks& callbacks) {
  using std::chrono::milliseconds;
  Outcome outcome;
  constexpr Steady::time_point kNever = Steady::time_point::max();
  Steady::time_point killAt = kNever;  // SIGKILL then, after a SIGTERM for a lost lease
  const bool ticking = callbacks.tickEvery.count() > 0 && callbacks.onTick;
  bool terminated = false;  // SIGTERM sent
  // SIGTERM this long before the deadline: the grace period, but never more than a third of what a
  // fresh lease has left, or a short lease would be stopped at once.
  const milliseconds graceBeforeDeadline = std::min(grace, callbacks.leaseTime / 3);
  Steady::time_point nextTick = ticking ? Steady::now() + callbacks.tickEvery : kNever;

  for (;;) {
    // Passed-on signals first, then the lost notice, then the child's exit: a notice that came
    // with the exit is still counted.
    signalfd_siginfo info{};
    while (::read(signalFd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
      if (info.ssi_signo == SIGCHLD) continue;
      // A signal the terminal sent (Ctrl-C, hang-up) went to the whole foreground process group,
      // the command included; passing it on would deliver it twice.
      if (info.ssi_code == SI_KERNEL) continue;
      ::kill(pid, static_cast<int>(info.ssi_signo));
    }

    std::uint64_t token = 0;
    bool lostNow = false;
    while (::read(lostRead_, &token, sizeof token) == static_cast<ssize_t>(sizeof token)) lostNow = true;
    if (lostNow && !outcome.lost) {
      outcome.lost = true;
      if (callbacks.onLost) callbacks.onLost(token);
      if (terminate && !terminated) {
        ::kill(pid, SIGTERM);
        terminated = true;
        killAt = std::min(killAt, Steady::now() + grace);
      }
    }

    int waitStatus = 0;
    const pid_t reaped = ::waitpid(pid, &waitStatus, WNOHANG);
    if (reaped == pid) {
      if (WIFSIGNALED(waitStatus)) {
        outcome.signal = WTERMSIG(waitStatus);
        outcome.status = 128 + outcome.signal;
      } else {
        outcome.status = WEXITSTATUS(waitStatus);
      }
      return outcome;
    }
    if (reaped < 0 && errno != EINTR) throwErrno("waitpid");

    Steady::time_point now = Steady::now();
    // The lease's own deadline: the command must not outlive it, reported lost or not.
    Steady::time_point termAt = kNever;
    if (terminate && callbacks.leaseDeadline) {
      const Steady::time_point deadline = callbacks.leaseDeadline();
      termAt = deadline - graceBeforeDeadline;
      if (terminated || now >= termAt) killAt = std::min(killAt, deadline);
      if (!terminated && now >= termAt) {
        if (callbacks.onDeadline) callbacks.onDeadline(deadline);
        ::kill(pid, SIGTERM);
        terminated = true;
        outcome.stoppedAtLeaseEnd = true;
      }
      now = Steady::now();
    }
    if (now >= killAt) {
      ::kill(pid, SIGKILL);
      killAt = kNever;
    }
    if (ticking && now >= nextTick) {
      callbacks.onTick();
      nextTick = now + callbacks.tickEvery;
    }

    const Steady::time_point wakeAt = std::min({nextTick, killAt, terminated ? kNever : termAt});
    int timeout = -1;
    if (wakeAt != kNever) {
      const auto left = std::chrono::ceil<milliseconds>(wakeAt - Steady::now()).count();
      timeout = static_cast<int>(std::clamp<milliseconds::rep>(left, 0, 60'000));
    }
    pollfd fds[2] = {{signalFd_, POLLIN, 0}, {lostRead_, POLLIN, 0}};
    if (::poll(fds, 2, timeout) < 0 && errno != EINTR) throwErrno("poll");
  }
}

void Supervisor::dieBySignal(int signo) {
  ::signal(signo, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signo);
  ::pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  ::raise(signo);
  std::_Exit(128 + signo);
}

}  // namespace dlock::cli
