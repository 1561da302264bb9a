#include "Supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <system_error>

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

// RAII for the posix_spawn attribute object.
struct SpawnAttributes {
  posix_spawnattr_t attr{};
  SpawnAttributes() { posix_spawnattr_init(&attr); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  ~SpawnAttributes() { posix_spawnattr_destroy(&attr); }
};

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

pid_t Supervisor::spawn(const std::vector<std::string>& command, SpawnError& error) {
  SpawnAttributes spawn;
  // The child starts with the mask dlock started with, and SIGPIPE's default unless the caller
  // had it ignored.
  short flags = POSIX_SPAWN_SETSIGMASK;
  posix_spawnattr_setsigmask(&spawn.attr, &startMask_);
  if (!pipeIgnoredAtStart_) {
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&spawn.attr, &defaults);
    flags = static_cast<short>(flags | POSIX_SPAWN_SETSIGDEF);
  }
  posix_spawnattr_setflags(&spawn.attr, flags);

  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int result = ::posix_spawnp(&pid, argv[0], nullptr, &spawn.attr, argv.data(), environ);
  if (result != 0) {
    error.error = result;
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
      if (terminate) {
        ::kill(pid, SIGTERM);
        killAt = Steady::now() + grace;
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

    const Steady::time_point now = Steady::now();
    if (now >= killAt) {
      ::kill(pid, SIGKILL);
      killAt = kNever;
    }
    if (ticking && now >= nextTick) {
      callbacks.onTick();
      nextTick = now + callbacks.tickEvery;
    }

    const Steady::time_point wakeAt = std::min(nextTick, killAt);
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
