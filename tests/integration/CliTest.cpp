// SPDX-License-Identifier: Apache-2.0
// The `dlock` command against a real redis-server: mutual exclusion between commands, conflicts,
// signals, exit statuses, `status`, a lease lost under a running command, usage errors, and
// passwords kept out of every output.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "LinkProxy.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "TlsCertificates.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

extern char** environ;

using namespace std::chrono_literals;
using dlock::test::LinkProxy;
using dlock::test::RedisClient;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using dlock::test::releaseSubscribers;
using Steady = std::chrono::steady_clock;

namespace {

// One run of the dlock command, with its stdout and stderr captured. It runs in its own process
// group, so whatever it started is killed with it if a check fails half-way.
class Cli {
 public:
  static constexpr int kInheritedFd = 9;

  explicit Cli(const std::vector<std::string>& args, const std::vector<std::string>& environment = {}) {
    std::vector<std::string> argv{DLOCK_CLI};
    argv.insert(argv.end(), args.begin(), args.end());
    // The caller's environment without DLOCK_URI, plus `environment`; built before fork.
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (std::strncmp(*entry, "DLOCK_URI=", 10) != 0) env.emplace_back(*entry);
    }
    env.insert(env.end(), environment.begin(), environment.end());
    std::vector<char*> argvPtrs;
    for (auto& arg : argv) argvPtrs.push_back(arg.data());
    argvPtrs.push_back(nullptr);
    std::vector<char*> envPtrs;
    for (auto& entry : env) envPtrs.push_back(entry.data());
    envPtrs.push_back(nullptr);

    int out[2];
    int err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::setpgid(0, 0);
      const int devNull = ::open("/dev/null", O_RDONLY);
      ::dup2(devNull, STDIN_FILENO);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      // dlock starts with 0, 1, 2 and 9 (a descriptor its caller passes on) open, nothing else.
      ::dup2(devNull, kInheritedFd);
      for (int fd = 3; fd < 1024; ++fd) {
        if (fd != kInheritedFd) ::close(fd);
      }
      // As from a shell: SIGPIPE at its default, whatever this test process set for itself.
      ::signal(SIGPIPE, SIG_DFL);
      ::execve(argvPtrs[0], argvPtrs.data(), envPtrs.data());
      ::_exit(126);
    }
    ::setpgid(pid_, pid_);  // also here, so a signal to the group cannot race the child's own call
    ::close(out[1]);
    ::close(err[1]);
    outFd_ = out[0];
    errFd_ = err[0];
    started_ = Steady::now();
  }
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;
  ~Cli() {
    if (!exited_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (outFd_ >= 0) ::close(outFd_);
    if (errFd_ >= 0) ::close(errFd_);
  }

  [[nodiscard]] pid_t pid() const { return pid_; }
  void signal(int signo) const { ::kill(pid_, signo); }

  // The next line the command (or dlock) wrote to stdout; nullopt at EOF or after `timeout`.
  std::optional<std::string> readLine(std::chrono::milliseconds timeout = dlock::test::kEventBudget) {
    const auto deadline = Steady::now() + timeout;
    for (;;) {
      const auto newline = out_.find('\n', lineStart_);
      if (newline != std::string::npos) {
        std::string line = out_.substr(lineStart_, newline - lineStart_);
        lineStart_ = newline + 1;
        return line;
      }
      if (Steady::now() >= deadline || !pump(deadline)) return std::nullopt;
    }
  }

  // Waits until dlock's stderr contains `text`; false at EOF or after `timeout`.
  bool waitForErr(const std::string& text, std::chrono::milliseconds timeout = dlock::test::kEventBudget) {
    const auto deadline = Steady::now() + timeout;
    while (err_.find(text) == std::string::npos) {
      if (Steady::now() >= deadline || !pump(deadline)) return false;
    }
    return true;
  }

  // Waits for dlock to exit, collecting its output: its exit status (128 + N when killed by
  // signal N), or -1 when it was still running after `timeout` (then it is killed).
  int wait(std::chrono::milliseconds timeout = 60s) {
    const auto deadline = Steady::now() + timeout;
    while (!exited_) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        finished_ = Steady::now();
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (Steady::now() >= deadline) {
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        exited_ = true;
        finished_ = Steady::now();
        status_ = -1;
        return status_;
      }
      pump(std::min(deadline, Steady::now() + 20ms));
    }
    // Output still in the pipes; a grandchild may hold them open a little longer.
    const auto drainUntil = Steady::now() + 2s;
    while (Steady::now() < drainUntil && pump(drainUntil)) {
    }
    return status_;
  }

  [[nodiscard]] const std::string& out() const { return out_; }
  [[nodiscard]] const std::string& err() const { return err_; }
  // From start to exit (wait() must have returned).
  [[nodiscard]] std::chrono::milliseconds elapsed() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(finished_ - started_);
  }
  [[nodiscard]] Steady::time_point finishedAt() const { return finished_; }

 private:
  // Reads what is available until `deadline`; false once both pipes are at EOF.
  bool pump(Steady::time_point deadline) {
    pollfd fds[2] = {{outFd_, POLLIN, 0}, {errFd_, POLLIN, 0}};
    if (outFd_ < 0 && errFd_ < 0) return false;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Steady::now()).count();
    if (::poll(fds, 2, static_cast<int>(std::max<long long>(0, left))) <= 0) return true;
    readInto(fds[0], outFd_, out_);
    readInto(fds[1], errFd_, err_);
    return outFd_ >= 0 || errFd_ >= 0;
  }
  static void readInto(const pollfd& polled, int& fd, std::string& into) {
    if (fd < 0 || (polled.revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n > 0) {
      into.append(chunk, static_cast<std::size_t>(n));
    } else {
      ::close(fd);
      fd = -1;
    }
  }

  pid_t pid_ = -1;
  int outFd_ = -1;
  int errFd_ = -1;
  std::string out_;
  std::string err_;
  std::size_t lineStart_ = 0;
  bool exited_ = false;
  int status_ = -1;
  Steady::time_point started_;
  Steady::time_point finished_;
};

// Bounds on how long dlock takes to start, talk to Redis and exit, or to act on a signal or a
// lost lease: generous for a sanitizer build on a busy machine, and far below the waits a test
// tells apart from them (a held key it must not wait for, a command that would run for a minute).
constexpr auto kPromptly = 10s;
constexpr int kCommandSeconds = 60;  // how long the commands of those tests would run if not stopped

// A file a command waits for, so that it ends when the test has seen what it waits for.
std::vector<std::string> untilExists(const std::string& file, const std::string& then) {
  return {"sh", "-c", "echo ready; while [ ! -e '" + file + "' ]; do sleep 0.05; done; " + then};
}

std::string testKey(const std::string& name) { return "dlock-test:{" + std::to_string(::getpid()) + ":" + name + "}"; }

// The Redis key holding the owner token of a dlock key (the default prefix).
std::string redisKey(const std::string& key) { return "dlock:{" + key + "}"; }

std::string tempFile(const std::string& name) {
  const std::string path = "/tmp/dlock-cli-test-" + std::to_string(::getpid()) + "-" + name;
  std::remove(path.c_str());
  return path;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

// Waits until process `pid` (not a child of this one) has ended, at most `timeout`: a pidfd turns
// readable when the process exits, zombie or reaped.
bool processEnds(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;  // already gone
  pollfd exited{fd, POLLIN, 0};
  const bool ended = ::poll(&exited, 1, static_cast<int>(timeout.count())) == 1;
  ::close(fd);
  return ended;
}

// A shell command that prints "ready", then sleeps in short steps for at most `seconds`
// (so nothing outlives a failed test for long), running `onTerm` on SIGTERM.
std::vector<std::string> readyThenSleep(const std::string& onTerm, int seconds = 10) {
  const std::string script = "trap '" + onTerm + "' TERM; echo ready; i=0; while [ $i -lt " +
                             std::to_string(seconds * 20) + " ]; do sleep 0.05; i=$((i+1)); done; exit 99";
  return {"sh", "-c", script};
}

// Checks the marks of `file`: "start X" and "end X" lines; true when every start is directly
// followed by its own end (no two sections overlapped). Counts the sections in `sections`.
bool marksNeverInterleave(const std::string& file, int& sections) {
  std::ifstream in(file);
  std::string what;
  std::string who;
  std::optional<std::string> open;
  bool ok = true;
  sections = 0;
  while (in >> what >> who) {
    if (what == "start") {
      if (open) ok = false;
      open = who;
    } else if (what == "end") {
      if (!open || *open != who) ok = false;
      open.reset();
      ++sections;
    }
  }
  return ok && !open;
}

std::vector<std::string> markingCommand(const std::string& who, const std::string& file) {
  return {"sh", "-c", "echo \"start $1\" >> \"$2\"; sleep 0.2; echo \"end $1\" >> \"$2\"", "sh", who, file};
}

std::vector<std::string> concat(std::vector<std::string> head, const std::vector<std::string>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}

}  // namespace

TEST_SUITE("Cli") {
  TEST_CASE("commands under one key started together never overlap") {
    RedisProcess server;
    const std::string key = testKey("exclusive");

    // The check sees overlap when there is some: the same commands without dlock interleave (each
    // ends only once all three have started, however slowly they start).
    const std::string unguarded = tempFile("unguarded");
    {
      std::vector<pid_t> pids;
      for (int i = 0; i < 3; ++i) {
        const std::vector<std::string> command = {
            "sh", "-c", "echo \"start $1\" >> \"$2\"; while [ \"$(grep -c start \"$2\")\" -lt 3 ]; do sleep 0.05; done; "
            "echo \"end $1\" >> \"$2\"", "sh", "u" + std::to_string(i), unguarded};
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
          std::vector<char*> argv;
          for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
          argv.push_back(nullptr);
          ::execvp("sh", argv.data());
          ::_exit(127);
        }
        pids.push_back(pid);
      }
      for (const pid_t pid : pids) ::waitpid(pid, nullptr, 0);
      int sections = 0;
      CHECK_FALSE(marksNeverInterleave(unguarded, sections));
      std::remove(unguarded.c_str());
    }

    const std::string marks = tempFile("marks");
    for (int round = 0; round < 3; ++round) {
      std::vector<std::unique_ptr<Cli>> runs;
      for (int i = 0; i < 3; ++i) {
        const std::string who = std::to_string(round) + "." + std::to_string(i);
        runs.push_back(std::make_unique<Cli>(concat({"--uri", server.uri(), key, "--"}, markingCommand(who, marks))));
      }
      for (auto& run : runs) {
        CHECK(run->wait() == 0);
        CHECK(run->err().empty());
      }
    }
    int sections = 0;
    CHECK(marksNeverInterleave(marks, sections));
    CHECK(sections == 9);
    std::remove(marks.c_str());
  }

  TEST_CASE("a held key: --no-wait gives the conflict code at once, a --wait that times out too") {
    RedisProcess server;
    const std::string key = testKey("conflict");
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    dlock::Lease held = lock->acquire(key);
    REQUIRE(held);
    const std::string ran = tempFile("conflict-ran");

    Cli noWait({"--uri", server.uri(), "--no-wait", key, "--", "touch", ran});
    CHECK(noWait.wait() == 1);
    CHECK(noWait.elapsed() < kPromptly);  // tried once; the key stays held for as long as the test runs
    CHECK_FALSE(exists(ran));
    CHECK(noWait.err().empty());  // a conflict is quiet, as with flock

    Cli customCode({"--uri", server.uri(), "-n", "-E", "42", key, "--", "touch", ran});
    CHECK(customCode.wait() == 42);

    Cli timedOut({"--uri", server.uri(), "--wait", "300ms", key, "--", "touch", ran});
    CHECK(timedOut.wait() == 1);
    CHECK(timedOut.elapsed() >= 300ms);
    CHECK(timedOut.elapsed() < 300ms + kPromptly);
    CHECK_FALSE(exists(ran));

    Cli verbose({"--uri", server.uri(), "-n", "-v", key, "--", "touch", ran});
    CHECK(verbose.wait() == 1);
    CHECK(verbose.err().find("is held by another owner (no owner label recorded; ") != std::string::npos);
    CHECK(verbose.err().find(" left); gave up at once") != std::string::npos);

    held.release();
    Cli free({"--uri", server.uri(), "--no-wait", key, "--", "touch", ran});
    CHECK(free.wait() == 0);
    CHECK(exists(ran));
    std::remove(ran.c_str());
  }

  TEST_CASE("--fair: waiting commands run in the order they asked for the key, and redlock refuses it") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const std::string key = testKey("fair");
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).fair().build();
    dlock::Lease held = lock->acquire(key);
    REQUIRE(held);
    const std::string out = tempFile("fair-order");
    std::vector<std::unique_ptr<Cli>> waiters;
    for (int i = 0; i < 3; ++i) {
      waiters.push_back(std::make_unique<Cli>(std::vector<std::string>{
          "--uri", server.uri(), "--fair", key, "--", "sh", "-c", "echo " + std::to_string(i) + " >> " + out}));
      // Command i is in the server's queue before command i + 1 starts.
      REQUIRE(dlock::test::eventually(
          [&] { return client.ok({"LLEN", "dlock:{" + key + "}:fair:queue"}).integer == i + 1; }));
    }
    held.release();
    for (auto& waiter : waiters) CHECK(waiter->wait() == 0);
    CHECK(readFile(out) == "0\n1\n2\n");
    std::remove(out.c_str());

    Cli refused({"--uri", "redlock://memory://;memory://;memory://", "--fair", key, "--", "true"});
    CHECK(refused.wait() == 2);
    CHECK(refused.err().find("no single queue") != std::string::npos);
  }

  TEST_CASE("--read runs beside readers, --write waits for them, status shows the readers, the writer and waiters") {
    RedisProcess server;
    const std::string key = testKey("read-write");
    auto rw = dlock::LockBuilder().backend(dlock::connect(server.uri())).buildReadWrite();
    dlock::Lease reading = rw->readLock()->acquire(key);
    REQUIRE(reading);
    Cli reader({"--uri", server.uri(), "--read", "--no-wait", key, "--", "echo", "read"});
    CHECK(reader.readLine() == "read");
    CHECK(reader.wait() == 0);
    Cli refused({"--uri", server.uri(), "--write", "--no-wait", key, "--", "echo", "wrote"});
    CHECK(refused.wait() == 1);
    Cli writer({"--uri", server.uri(), "--write", key, "--", "echo", "wrote"});
    REQUIRE(eventually([&] { return rw->inspect(key).waiters.size() == 1; }));
    Cli status({"--uri", server.uri(), "status", key});
    CHECK(status.wait() == 0);
    const std::string& out = status.out();
    CAPTURE(out);
    // Every line agrees with the exit status: held by a reader, whose token is named by its prefix.
    CHECK(out.find("kind:          read-write\n") != std::string::npos);
    CHECK(out.find("held:          yes, by 1 reader(s)\n") != std::string::npos);
    CHECK(out.find("writer:        -\nreaders:       1\n  token " + reading.token().substr(0, 8) + "...") !=
          std::string::npos);
    CHECK(out.find("waiters:       1\n  write, token ") != std::string::npos);
    CHECK(out.find(reading.token()) == std::string::npos);  // a token is the right to release: never shown whole
    reading.release();
    CHECK(writer.readLine() == "wrote");
    CHECK(writer.wait() == 0);
    Cli free({"--uri", server.uri(), "status", key});
    CHECK(free.wait() == 1);

    // Held by the writer: exit 0, and the lines say so, with its token's prefix and fencing token.
    dlock::Lease writing = rw->writeLock()->acquire(key);
    REQUIRE(writing);
    Cli written({"--uri", server.uri(), "status", key});
    CHECK(written.wait() == 0);
    CAPTURE(written.out());
    CHECK(written.out().find("held:          yes, by the writer\nfencing token: " +
                             std::to_string(writing.fencingToken()) + "\nwriter:        token " +
                             writing.token().substr(0, 8) + "...") != std::string::npos);
    CHECK(written.out().find("held:          no") == std::string::npos);
    writing.release();

    // A key is a read-write lock or a semaphore, never both at once.
    Cli both({"--uri", server.uri(), "--read", "--permits", "1", "--capacity", "2", key, "--", "true"});
    CHECK(both.wait() == 2);
    CHECK(both.err().find("--read and --permits exclude each other") != std::string::npos);

    Cli redlock({"--uri", "redlock://memory://;memory://;memory://", "--read", key, "--", "true"});
    CHECK(redlock.wait() == 2);
    CHECK(redlock.err().find("Redlock spreads a key over independent servers") != std::string::npos);
  }

  TEST_CASE("a waiting dlock gets the key when its holder releases it") {
    RedisProcess server;
    const std::string key = testKey("handoff");
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    dlock::Lease held = lock->acquire(key);
    REQUIRE(held);
    Cli waiter({"--uri", server.uri(), "--wait", "10s", key, "--", "echo", "ran"});
    CHECK_FALSE(waiter.readLine(400ms).has_value());  // still waiting
    held.release();
    CHECK(waiter.readLine(dlock::test::kEventBudget) == "ran");  // the lease would have been renewed for ever
    CHECK(waiter.wait() == 0);
  }

  TEST_CASE("a wait rides out a 0.3 s restart of the server: with --wait 5s and without --wait, the command runs") {
    RedisProcess server;
    for (const bool bounded : {true, false}) {
      CAPTURE(bounded);
      const std::string key = testKey(bounded ? "restart-bounded" : "restart-unbounded");
      std::vector<std::string> args = {"--uri", server.uri()};
      if (bounded) args.insert(args.end(), {"--wait", "5s"});
      RedisClient client(server.host(), server.port());  // of this round's server: restarted in the last
      // Held by an owner that vanishes with the restart: the server keeps no data.
      REQUIRE(client.ok({"SET", redisKey(key), "another-owner", "PX", "60000"}).str == "OK");
      Cli run(concat(args, {key, "--", "echo", "ran"}));
      REQUIRE(eventually([&] { return releaseSubscribers(client, key) >= 1; }));  // dlock is waiting
      server.kill();
      std::this_thread::sleep_for(300ms);  // the outage itself, not a wait for an event
      server.restart();
      CHECK(run.wait() == 0);
      CAPTURE(run.err());
      CHECK(run.out() == "ran\n");
    }
  }

  TEST_CASE("a wait whose outage outlasts it exits 125 at its end, not a slice or a back-off later") {
    RedisProcess server;
    const std::string key = testKey("outage-outlasts-wait");
    const std::string ran = tempFile("outage-ran");
    RedisClient client(server.host(), server.port());
    REQUIRE(client.ok({"SET", redisKey(key), "another-owner", "PX", "60000"}).str == "OK");
    Cli run({"--uri", server.uri(), "--wait", "1s", key, "--", "touch", ran});
    REQUIRE(eventually([&] { return releaseSubscribers(client, key) >= 1; }));
    const auto waiting = Steady::now();  // the wait began before this
    server.kill();  // for good
    CHECK(run.wait() == 125);
    CAPTURE(run.err());
    CHECK(run.elapsed() >= 1s);  // rode out the outage to the end of the wait ...
    // ... and no further: its last try (a refused connect) is made at the deadline. The slack is
    // dlock's exit and this test's noticing it; a wait that slept past its deadline would add a
    // slice (100 ms) or a back-off step (up to 500 ms).
    constexpr auto kExitSlack = 100ms;
    CHECK(run.finishedAt() - waiting < 1s + kExitSlack);
    CHECK(run.err().find("the backend stayed unreachable for ") != std::string::npos);
    CHECK_FALSE(exists(ran));
  }

  TEST_CASE("a signal while the wait rides out an outage ends dlock by that signal, the command never run") {
    RedisProcess server;
    LinkProxy proxy(server.host(), server.port());  // counts dlock's connection attempts
    const std::string key = testKey("outage-interrupted");
    const std::string ran = tempFile("outage-interrupted-ran");
    RedisClient client(server.host(), server.port());
    REQUIRE(client.ok({"SET", redisKey(key), "another-owner", "PX", "60000"}).str == "OK");
    Cli waiter({"--uri", proxy.uri(), key, "--", "touch", ran});
    REQUIRE(eventually([&] { return releaseSubscribers(client, key) >= 1; }));
    const std::uint64_t before = proxy.acceptedConnections();
    server.kill();  // for good: the wait would ride it out for 30 s
    // dlock is riding out the outage: it tried to connect twice since.
    REQUIRE(eventually([&] { return proxy.acceptedConnections() >= before + 2; }));
    waiter.signal(SIGTERM);
    const auto signalled = Steady::now();
    CHECK(waiter.wait() == 128 + SIGTERM);
    CHECK(waiter.finishedAt() - signalled < kPromptly);  // within a slice or a pause, not the outage's 30 s
    CHECK_FALSE(exists(ran));
  }

  TEST_CASE("renewals failing: a command stopped before its lease ends gives the lost code, not its 143, and "
            "one line on the failed release") {
    RedisProcess server;
    const std::string key = testKey("stopped-at-lease-end");
    std::vector<std::string> args = {"--uri", server.uri(), "--ttl", "6s", "--grace", "2s"};
    int expected = 3;
    SUBCASE("the default lost code") {}
    SUBCASE("--lost-exit-code") {
      args.insert(args.end(), {"--lost-exit-code", "9"});
      expected = 9;
    }
    // The command dies by the SIGTERM dlock sends it (sleep keeps the shell's pid).
    Cli run(concat(concat(args, {key, "--"}), {"sh", "-c", "echo $$; exec sleep " + std::to_string(kCommandSeconds)}));
    const std::optional<std::string> line = run.readLine();
    REQUIRE(line.has_value());
    const pid_t command = static_cast<pid_t>(std::stol(*line));
    server.pause();  // renewals (every 2 s) and the release time out from now on
    const auto paused = Steady::now();
    // The last renewal was sent before the pause, so the lease ends within 6 s of it; the command
    // gets SIGTERM 2 s before that end.
    const bool stopped = processEnds(command, 6s + kPromptly);
    const auto stoppedAt = Steady::now();
    const int status = run.wait(std::chrono::seconds(kCommandSeconds));
    server.resume();
    if (!stopped) ::kill(command, SIGKILL);
    REQUIRE(stopped);
    CHECK(stoppedAt - paused < 6s);
    CHECK(status == expected);
    const std::string& err = run.err();
    CAPTURE(err);
    CHECK(err.find("could not be renewed and ends in") != std::string::npos);
    // The release could not reach the paused server: said once, whether or not the lease's
    // destructor tried it once more (every line about the release counts).
    int releaseLines = 0;
    std::istringstream lines(err);
    for (std::string text; std::getline(lines, text);) {
      if (text.find("releas") != std::string::npos) ++releaseLines;
    }
    CHECK(releaseLines == 1);
    CHECK(err.find("dlock: releasing '" + key + "' failed: ") != std::string::npos);
  }

  TEST_CASE("-v on a held key names its holder: the owner label it recorded and since when, or that it recorded none") {
    RedisProcess server;
    const std::string key = testKey("holder-named");
    const std::string done = tempFile("holder-done");
    char host[256] = {};
    REQUIRE(::gethostname(host, sizeof host - 1) == 0);
    {
      Cli holder(concat({"--uri", server.uri(), "--owner-label", "job-7", key, "--"}, untilExists(done, "exit 0")));
      REQUIRE(holder.readLine() == "ready");
      const std::string named = "is held by another owner, 'host=" + std::string(host) +
                                " pid=" + std::to_string(holder.pid()) + " job-7' (since 20";

      Cli quiet({"--uri", server.uri(), "-n", key, "--", "true"});
      CHECK(quiet.wait() == 1);
      CHECK(quiet.err().empty());  // still as quiet as flock -n

      Cli noWait({"--uri", server.uri(), "-n", "-v", key, "--", "true"});
      CHECK(noWait.wait() == 1);
      CAPTURE(noWait.err());
      CHECK(noWait.err().find(named) != std::string::npos);
      CHECK(noWait.err().find(" left); gave up at once") != std::string::npos);

      Cli timedOut({"--uri", server.uri(), "-w", "200ms", "-v", key, "--", "true"});
      CHECK(timedOut.wait() == 1);
      CAPTURE(timedOut.err());
      CHECK(timedOut.err().find(named) != std::string::npos);
      CHECK(timedOut.err().find(" left); gave up after 200ms") != std::string::npos);

      std::ofstream(done).put('\n');
      CHECK(holder.wait() == 0);
    }
    std::remove(done.c_str());

    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();  // records no label
    dlock::Lease held = lock->acquire(key);
    REQUIRE(held);
    Cli unlabelled({"--uri", server.uri(), "-n", "-v", key, "--", "true"});
    CHECK(unlabelled.wait() == 1);
    CAPTURE(unlabelled.err());
    CHECK(unlabelled.err().find("is held by another owner (no owner label recorded; ") != std::string::npos);
  }

  TEST_CASE("SIGTERM to dlock reaches the command, dlock exits with its status and releases the key") {
    RedisProcess server;
    const std::string key = testKey("sigterm");
    const std::string mark = tempFile("sigterm-mark");
    Cli run(concat({"--uri", server.uri(), key, "--"}, readyThenSleep("echo got-term > " + mark + "; exit 7")));
    REQUIRE(run.readLine() == "ready");

    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    CHECK_FALSE(lock->tryLock(key));  // held by dlock while the command runs

    run.signal(SIGTERM);
    CHECK(run.wait() == 7);
    CHECK(readFile(mark) == "got-term\n");
    const bool free = lock->tryLock(key);  // released: free at once
    CHECK(free);
    if (free) lock->unlock(key);
    std::remove(mark.c_str());
  }

  TEST_CASE("SIGTERM while waiting for the key ends dlock by that signal, the command never run") {
    RedisProcess server;
    const std::string key = testKey("interrupted");
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    dlock::Lease held = lock->acquire(key);
    REQUIRE(held);
    const std::string ran = tempFile("interrupted-ran");
    Cli waiter({"--uri", server.uri(), key, "--", "touch", ran});
    RedisClient client(server.host(), server.port());
    CHECK(eventually([&] { return releaseSubscribers(client, key) >= 1; }));  // dlock is waiting for the key
    waiter.signal(SIGTERM);
    const auto signalled = Steady::now();
    CHECK(waiter.wait() == 128 + SIGTERM);
    CHECK(waiter.finishedAt() - signalled < kPromptly);  // the key stays held: only the signal ends it
    CHECK_FALSE(exists(ran));
    CHECK(held.isHeld());
  }

  TEST_CASE("a command killed by a passed-on SIGINT, SIGTERM or SIGHUP gives 128 + the signal") {
    RedisProcess server;
    const std::string key = testKey("killed");
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    for (const int signo : {SIGINT, SIGTERM, SIGHUP}) {
      CAPTURE(signo);
      Cli run({"--uri", server.uri(), key, "--", "sh", "-c",
               "echo ready; exec sleep " + std::to_string(kCommandSeconds)});
      REQUIRE(run.readLine() == "ready");
      const auto signalled = Steady::now();
      run.signal(signo);
      CHECK(run.wait(std::chrono::seconds(kCommandSeconds)) == 128 + signo);
      CHECK(run.finishedAt() - signalled < kPromptly);
      const bool free = lock->tryLock(key);
      CHECK(free);
      if (free) lock->unlock(key);
    }
  }

  TEST_CASE("the command's exit status passes through, 126 and 127 when it cannot run") {
    RedisProcess server;
    const std::string key = testKey("status");
    Cli fortyTwo({"--uri", server.uri(), key, "--", "sh", "-c", "exit 42"});
    CHECK(fortyTwo.wait() == 42);
    Cli zero({"--uri", server.uri(), key, "--", "true"});
    CHECK(zero.wait() == 0);
    Cli missing({"--uri", server.uri(), key, "--", "/nonexistent/dlock-test-command"});
    CHECK(missing.wait() == 127);
    CHECK(missing.err().find("cannot run '/nonexistent/dlock-test-command'") != std::string::npos);
    Cli notExecutable({"--uri", server.uri(), key, "--", "/etc/hostname"});
    CHECK(notExecutable.wait() == 126);

    // The command starts with no signal blocked and SIGPIPE at its default, whatever dlock does
    // for itself: each of these ends the shell.
    Cli pipeSignal({"--uri", server.uri(), key, "--", "sh", "-c", "kill -PIPE $$; echo survived"});
    CHECK(pipeSignal.wait() == 128 + SIGPIPE);
    CHECK(pipeSignal.out().empty());
    for (const char* signal : {"TERM", "INT", "HUP", "CHLD"}) {
      CAPTURE(signal);
      Cli unblocked({"--uri", server.uri(), key, "--", "sh", "-c",
                     std::string("trap 'echo caught' ") + signal + "; kill -" + signal + " $$; exit 5"});
      CHECK(unblocked.wait() == 5);
      CHECK(unblocked.out() == "caught\n");
    }

    // And the key is free after each of them.
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).build();
    const bool free = lock->tryLock(key);
    CHECK(free);
    if (free) lock->unlock(key);
  }

  TEST_CASE("dlock killed by SIGKILL takes its command with it: nothing runs on without the lease") {
    RedisProcess server;
    const std::string key = testKey("supervisor-killed");
    Cli run({"--uri", server.uri(), key, "--", "sh", "-c", "echo $$; exec sleep 300"});
    const std::optional<std::string> line = run.readLine();
    REQUIRE(line.has_value());
    const pid_t command = static_cast<pid_t>(std::stol(*line));

    run.signal(SIGKILL);
    CHECK(run.wait() == 128 + SIGKILL);
    // The kernel signals the command while it reparents it, before dlock's exit is reported; the
    // bound only covers a loaded machine scheduling the dying command.
    const bool ended = processEnds(command, 20s);
    CHECK(ended);
    if (!ended) ::kill(command, SIGKILL);  // not left behind by a failing run
  }

  TEST_CASE("the command gets the descriptors dlock was given, none of dlock's own") {
    RedisProcess server;
    const std::string key = testKey("descriptors");
    // Under the watchdog, with a connection to Redis open in dlock while the command runs.
    Cli run({"--uri", server.uri(), "--ttl", "3s", key, "--", "sh", "-c", "sleep 0.2; ls /proc/$$/fd"});
    CHECK(run.wait() == 0);
    CHECK(run.out() == "0\n1\n2\n" + std::to_string(Cli::kInheritedFd) + "\n");
  }

  TEST_CASE("dlock status shows held or free, the remaining lease and the fencing token, and exits 0 held, 1 free") {
    RedisProcess server;
    const std::string key = testKey("inspect");
    auto lock = dlock::LockBuilder().backend(dlock::connect(server.uri())).watchdogLease(20s).build();

    Cli never({"--uri", server.uri(), "status", key});
    CHECK(never.wait() == 1);
    CHECK(never.out().find("held:          no\n") != std::string::npos);
    CHECK(never.out().find("fencing token: 0\n") != std::string::npos);

    const std::uint64_t first = lock->acquire(key).fencingToken();  // released at once
    dlock::Lease held = lock->acquire(key);
    REQUIRE(held);
    const std::uint64_t token = held.fencingToken();
    CHECK(token > first);

    Cli whileHeld({"status", key}, {"DLOCK_URI=" + server.uri()});  // the URI from the environment
    CHECK(whileHeld.wait() == 0);
    const std::string& out = whileHeld.out();
    CAPTURE(out);
    CHECK(out.find("key:           '" + key + "'\n") != std::string::npos);
    CHECK(out.find("backend:       " + server.uri() + "\n") != std::string::npos);
    CHECK(out.find("held:          yes\n") != std::string::npos);
    CHECK(out.find("fencing token: " + std::to_string(token) + "\n") != std::string::npos);
    const auto remainingAt = out.find("remaining:     ");
    REQUIRE(remainingAt != std::string::npos);
    const long long remaining = std::stoll(out.substr(remainingAt + 15));
    CHECK(out.substr(out.find_first_not_of("0123456789", remainingAt + 15), 3) == "ms\n");
    CHECK(remaining > 10000);
    CHECK(remaining <= 20000);

    held.release();
    Cli afterRelease({"--uri", server.uri(), "status", key});
    CHECK(afterRelease.wait() == 1);
    CHECK(afterRelease.out().find("held:          no\nremaining:     -\nfencing token: " + std::to_string(token) +
                                  "\n") != std::string::npos);
  }

  TEST_CASE("dlock status shows the owner label a running dlock recorded: host, pid, since, and none with --no-owner-label") {
    RedisProcess server;
    dlock::test::RedisClient client(server.host(), server.port());
    const std::string key = testKey("owner");
    const std::string done = tempFile("owner-done");
    char host[256] = {};
    REQUIRE(::gethostname(host, sizeof host - 1) == 0);
    const auto before = std::chrono::system_clock::now();
    {
      Cli run(concat({"--uri", server.uri(), "--owner-label", "job\n1", key, "--"}, untilExists(done, "exit 0")));
      REQUIRE(run.readLine() == "ready");
      Cli status({"--uri", server.uri(), "status", key});
      CHECK(status.wait() == 0);
      const std::string& out = status.out();
      CAPTURE(out);
      // Printed safely: the newline of the text as \x0a, inside quotes.
      CHECK(out.find("owner:         'host=" + std::string(host) + " pid=" + std::to_string(run.pid()) +
                     " job\\x0a1'\n") != std::string::npos);
      const auto sinceAt = out.find("since:         ");
      REQUIRE(sinceAt != std::string::npos);
      const std::string since = out.substr(sinceAt + 15, 24);  // 2026-11-25T04:53:49.123Z
      CHECK(since.size() == 24);
      CHECK(since[10] == 'T');
      CHECK(since.back() == 'Z');
      const std::time_t beforeSeconds = std::chrono::system_clock::to_time_t(before);
      std::tm utc{};
      REQUIRE(::gmtime_r(&beforeSeconds, &utc) != nullptr);
      char earliest[32];
      REQUIRE(std::strftime(earliest, sizeof earliest, "%Y-%m-%dT%H:%M:%S", &utc) > 0);
      CHECK(since.substr(0, 19) >= std::string(earliest));  // ISO text orders as time does
      CHECK(client.ok({"PTTL", redisKey(key) + ":owner"}).integer > 0);
      std::ofstream(done).put('\n');
      CHECK(run.wait() == 0);
    }
    CHECK(client.ok({"EXISTS", redisKey(key) + ":owner"}).integer == 0);  // released with the lease
    std::remove(done.c_str());

    Cli unlabelled(concat({"--uri", server.uri(), "--no-owner-label", key, "--"}, untilExists(done, "exit 0")));
    REQUIRE(unlabelled.readLine() == "ready");
    Cli status({"--uri", server.uri(), "status", key});
    CHECK(status.wait() == 0);
    CHECK(status.out().find("owner:         -\nsince:         -\n") != std::string::npos);
    CHECK(client.ok({"EXISTS", redisKey(key) + ":owner"}).integer == 0);
    std::ofstream(done).put('\n');
    CHECK(unlabelled.wait() == 0);
    std::remove(done.c_str());
  }

  TEST_CASE("a lease lost while the command runs: message, command terminated, the lost exit code") {
    RedisProcess server;
    RedisClient client(server.host(), server.port());
    const std::string key = testKey("lost");
    const std::string mark = tempFile("lost-mark");

    SUBCASE("the default: SIGTERM, exit code 3") {
      Cli run(concat({"--uri", server.uri(), "--ttl", "3s", key, "--"},
                     readyThenSleep("echo got-term > " + mark + "; exit 0", kCommandSeconds)));
      REQUIRE(run.readLine() == "ready");
      CHECK(client.ok({"DEL", redisKey(key)}).integer == 1);  // behind its back
      const auto deleted = Steady::now();
      CHECK(run.wait(std::chrono::seconds(kCommandSeconds)) == 3);
      CHECK(run.finishedAt() - deleted < 1s + kPromptly);  // the next renewal (every 1 s) finds it lost
      CHECK(readFile(mark) == "got-term\n");
      CHECK(run.err().find("dlock: lost the lock '" + key + "' on " + server.uri()) != std::string::npos);
      CHECK(run.err().find("stopping it (SIGTERM, then SIGKILL after 5s)") != std::string::npos);
    }
    SUBCASE("a command that ignores SIGTERM gets SIGKILL after the grace period, and a chosen code") {
      Cli run(concat({"--uri", server.uri(), "--ttl", "3s", "--grace", "300ms", "--lost-exit-code", "9", key, "--"},
                     readyThenSleep("", kCommandSeconds)));  // trap '' TERM: ignored
      REQUIRE(run.readLine() == "ready");
      CHECK(client.ok({"DEL", redisKey(key)}).integer == 1);
      const auto deleted = Steady::now();
      CHECK(run.wait(std::chrono::seconds(kCommandSeconds)) == 9);
      CHECK(run.finishedAt() - deleted >= 300ms);
      CHECK(run.finishedAt() - deleted < 1s + kPromptly);
      CHECK(run.err().find("dlock: lost the lock") != std::string::npos);
    }
    SUBCASE("--on-lost ignore lets the command finish, and still reports the loss") {
      const std::string go = tempFile("lost-go");
      Cli run(concat({"--uri", server.uri(), "--ttl", "3s", "--on-lost", "ignore", key, "--"},
                     untilExists(go, "echo finished > " + mark)));
      REQUIRE(run.readLine() == "ready");
      CHECK(client.ok({"DEL", redisKey(key)}).integer == 1);
      CHECK(run.waitForErr("letting it finish"));  // the loss was noticed while the command ran
      std::ofstream(go).close();
      CHECK(run.wait() == 3);
      std::remove(go.c_str());
      CHECK(readFile(mark) == "finished\n");
      CHECK(run.err().find("letting it finish") != std::string::npos);
    }
    std::remove(mark.c_str());
  }

  TEST_CASE("renewals that keep failing stop the command by the lease's end: SIGTERM first, SIGKILL at the end") {
    RedisProcess server;
    const std::string key = testKey("deadline");
    const std::string mark = tempFile("deadline-mark");
    // Renewed every second; the command notes SIGTERM and goes on, so only SIGKILL ends it.
    Cli run(concat({"--uri", server.uri(), "--ttl", "3s", "--grace", "1s", key, "--"},
                   readyThenSleep("echo got-term >> " + mark, kCommandSeconds)));
    REQUIRE(run.readLine() == "ready");
    server.pause();  // renewals time out from now on: nothing says the lease is lost, it runs out
    const auto paused = Steady::now();
    const int status = run.wait(std::chrono::seconds(kCommandSeconds));
    server.resume();
    CHECK(status == 3);  // the lost exit code: the lease ended under the command
    CHECK(readFile(mark) == "got-term\n");
    CHECK(run.err().find("could not be renewed and ends in") != std::string::npos);
    // The last renewal was sent at most a second before the pause: the lease ends 2 to 3 s after it,
    // and SIGKILL comes at that end, not before.
    CHECK(run.finishedAt() - paused >= 1900ms);
    CHECK(run.finishedAt() - paused < 3s + kPromptly);
    std::remove(mark.c_str());
  }

  TEST_CASE("--verbose logs the acquisition, the renewals and the release") {
    RedisProcess server;
    const std::string key = testKey("verbose");
    // The command runs until the first renewal was logged (every 500 ms).
    const std::string go = tempFile("verbose-go");
    Cli run(concat({"--uri", server.uri(), "--verbose", "--ttl", "1500ms", key, "--"}, untilExists(go, "true")));
    CHECK(run.waitForErr("dlock: renewed the lease of '" + key + "'"));
    std::ofstream(go).close();
    CHECK(run.wait() == 0);
    std::remove(go.c_str());
    const std::string& err = run.err();
    CAPTURE(err);
    CHECK(err.find("dlock: acquired '" + key + "' on " + server.uri() + " (fencing token ") != std::string::npos);
    CHECK(err.find("; lease 1500ms, renewed every 500ms)") != std::string::npos);
    CHECK(err.find("dlock: running sh -c ") != std::string::npos);
    CHECK(err.find("dlock: the command exited with status 0") != std::string::npos);
    CHECK(err.find("dlock: released '" + key + "'") != std::string::npos);
  }

  TEST_CASE("--help exits 0, bad arguments exit 2 with the usage, an unreachable server 125") {
    Cli help({"--help"});
    CHECK(help.wait() == 0);
    CHECK(help.out().rfind("Usage: dlock [OPTIONS] KEY -- COMMAND [ARGS...]", 0) == 0);
    CHECK(help.out().find("Examples:") != std::string::npos);

    for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
             {}, {"k"}, {"k", "--"}, {"--ttl", "5x", "k", "--", "true"}, {"--bogus", "k", "--", "true"},
             {"-E", "300", "k", "--", "true"}, {"--on-lost", "maybe", "k", "--", "true"}, {"status"}}) {
      Cli run(bad);
      CHECK(run.wait() == 2);
      CHECK(run.out().empty());
      CHECK(run.err().rfind("dlock: ", 0) == 0);
      CHECK(run.err().find("Usage: dlock") != std::string::npos);
    }

    Cli badUri({"--uri", "nope://x", "k", "--", "true"});
    CHECK(badUri.wait() == 2);
    CHECK(badUri.err().find("dlock: bad URI 'nope://x'") != std::string::npos);

    const std::string nobody = "redis://127.0.0.1:" + std::to_string(dlock::test::freeLoopbackPort());
    Cli unreachable({"--uri", nobody, "k", "--", "true"});
    CHECK(unreachable.wait() == 125);
    CHECK_FALSE(unreachable.err().empty());
    // The hint names a fix the command has: it has no lazy_connect.
    CHECK(unreachable.err().find("check the host and port") != std::string::npos);
    CHECK(unreachable.err().find("lazy_connect") == std::string::npos);
    Cli unreachableStatus({"--uri", nobody, "status", "k"});
    CHECK(unreachableStatus.wait() == 125);
    CHECK(unreachableStatus.err().find("lazy_connect") == std::string::npos);
  }

  TEST_CASE("a password holding URI syntax ('/', '?', semicolon, '@') is kept out of every message, whole and in part") {
    // Such a URI is refused before any connection; the refusal must not quote the password.
    for (const std::string& uri : {std::string("redis://:Qz1;Wk2/Vb3@127.0.0.1:6379"),
                                   std::string("redis://u:Qz1?Wk2@127.0.0.1:6379"),
                                   std::string("redlock://redis://:Qz1;Wk2@h1:1;redis://h2:2;redis://h3:3"),
                                   std::string("redis+sentinel://h/m?sentinel_password=Qz1&Wk2&bogus=1")}) {
      CAPTURE(uri);
      Cli run({"--uri", uri, "-v", "k", "--", "true"});
      CHECK(run.wait() == 2);
      CAPTURE(run.err());
      CHECK(run.err().find("dlock: bad URI") != std::string::npos);
      for (const char* piece : {"Qz1", "Wk2", "Vb3"}) CHECK(run.err().find(piece) == std::string::npos);
      Cli status({"status", "k"}, {"DLOCK_URI=" + uri});
      CHECK(status.wait() == 2);
      CHECK(status.err().find("Qz1") == std::string::npos);
    }
  }

  TEST_CASE("a password in the URI never appears in any output") {
    const std::string password = "Pw-9f3c-secret";
    RedisProcess::Options options;
    options.config = {"requirepass " + password};
    RedisProcess server(options);
    const std::string port = std::to_string(server.port());
    const std::string uri = "redis://:" + password + "@127.0.0.1:" + port;
    const std::string key = testKey("password");
    const auto checkClean = [&](Cli& run) {
      CAPTURE(run.out());
      CAPTURE(run.err());
      CHECK(run.out().find(password) == std::string::npos);
      CHECK(run.err().find(password) == std::string::npos);
      CHECK(run.err().find("Pw-9f3c") == std::string::npos);
    };

    Cli verbose({"--uri", uri, "-v", "--ttl", "1500ms", key, "--", "sleep", "0.2"});
    CHECK(verbose.wait() == 0);
    CHECK(verbose.err().find("on redis://:***@127.0.0.1:" + port) != std::string::npos);
    checkClean(verbose);

    Cli fromEnvironment({"-v", key, "--", "true"}, {"DLOCK_URI=" + uri});
    CHECK(fromEnvironment.wait() == 0);
    CHECK(fromEnvironment.err().find("redis://:***@127.0.0.1:" + port) != std::string::npos);
    checkClean(fromEnvironment);

    Cli status({"--uri", uri, "status", key});
    CHECK(status.wait() == 1);  // free
    CHECK(status.out().find("backend:       redis://:***@127.0.0.1:" + port + "\n") != std::string::npos);
    checkClean(status);

    // The password-only spelling, in a URI rejected before any connection: the message quotes it.
    Cli badOption({"--uri", "redis://" + password + "@127.0.0.1:" + port + "?bogus=1", key, "--", "true"});
    CHECK(badOption.wait() == 2);
    CHECK(badOption.err().find("unknown option 'bogus'") != std::string::npos);
    checkClean(badOption);

    // A wrong password: the server refuses, dlock says so.
    Cli wrong({"--uri", "redis://:" + password + "-wrong@127.0.0.1:" + port, key, "--", "true"});
    CHECK(wrong.wait() == 125);
    CHECK_FALSE(wrong.err().empty());
    checkClean(wrong);

    // A bad argument next to a password.
    Cli usage({"--uri", uri, "--ttl", "x", key, "--", "true"});
    CHECK(usage.wait() == 2);
    checkClean(usage);
  }

  TEST_CASE("dlock over rediss:// and unix://: the command runs under the key, status reads it, a bad CA exits 125") {
    dlock::test::TlsCertificates certificates;
    RedisProcess::Options options;
    options.tls = RedisProcess::Tls{certificates.server().cert, certificates.server().key, certificates.caFile(), false};
    options.unixSocket = true;
    RedisProcess server(options);
    const std::string key = testKey("tls-cli");
    const std::string tls = "rediss://127.0.0.1:" + std::to_string(server.tlsPort()) + "?tls_ca_file=" +
                            certificates.caFile();
    const std::string unix = "unix://" + server.socketPath();
    RedisClient client(server.host(), server.port());
    for (const std::string& uri : {tls, unix}) {
      CAPTURE(uri);
      // The command sees the key held while it runs: it asks the server itself.
      Cli run({"--uri", uri, key, "--", "redis-cli", "-p", std::to_string(server.port()), "EXISTS",
               "dlock:{" + key + "}"});
      CHECK(run.wait() == 0);
      CHECK(run.out() == "1\n");
      CHECK(client.ok({"EXISTS", "dlock:{" + key + "}"}).integer == 0);  // released after it
      Cli status({"--uri", uri, "status", key});
      CHECK(status.wait() == 1);  // free: status exits 1
      CHECK(status.out().find("held:          no\n") != std::string::npos);
    }
    Cli untrusted({"--uri", "rediss://:pa55-cli@127.0.0.1:" + std::to_string(server.tlsPort()), "status", key});
    CHECK(untrusted.wait() == 125);
    CAPTURE(untrusted.err());
    CHECK(untrusted.err().find("not signed by a trusted CA") != std::string::npos);
    CHECK(untrusted.err().find("pa55-cli") == std::string::npos);
  }

  TEST_CASE("--permits N --capacity C: at most C commands run at once, the next when one ends, status shows them") {
    RedisProcess server;
    const std::string key = testKey("permits");
    const std::vector<std::string> permits{"--uri", server.uri(), "--permits", "1", "--capacity", "2", key, "--"};
    const std::string doneA = tempFile("permits-a");
    const std::string doneRest = tempFile("permits-rest");
    Cli a(concat(permits, untilExists(doneA, "true")));
    CHECK(a.readLine() == std::optional<std::string>("ready"));
    Cli b(concat(permits, untilExists(doneRest, "true")));
    CHECK(b.readLine() == std::optional<std::string>("ready"));
    Cli c(concat(permits, untilExists(doneRest, "true")));
    // C queues: the server lists one waiter.
    std::string status;
    CHECK(eventually([&] {
      Cli shown({"--uri", server.uri(), "status", key});
      const int code = shown.wait();
      status = shown.out();
      return code == 0 && status.find("waiters:       1\n") != std::string::npos;
    }));
    CAPTURE(status);
    CHECK(status.find("semaphore:     '" + key + "'\n") != std::string::npos);
    CHECK(status.find("permits:       2 of 2 in use\n") != std::string::npos);
    CHECK(status.find("held:          yes\n") != std::string::npos);
    CHECK(status.find("holders:       2\n  1 permits, token ") != std::string::npos);
    CHECK(status.find("waiters:       1\n  1 permits, token ") != std::string::npos);

    std::ofstream(doneA).put('\n');  // A ends: its release admits C
    CHECK(a.wait() == 0);
    CHECK(c.readLine() == std::optional<std::string>("ready"));
    std::ofstream(doneRest).put('\n');
    CHECK(b.wait() == 0);
    CHECK(c.wait() == 0);
    Cli after({"--uri", server.uri(), "status", key});
    CHECK(after.wait() == 1);
    CHECK(after.out().find("permits:       0 of 2 in use\n") != std::string::npos);
    std::remove(doneA.c_str());
    std::remove(doneRest.c_str());
  }

  TEST_CASE("resize KEY N stores the capacity for all, admits the waiters that fit, and says how long it lasts") {
    RedisProcess server;
    const std::string key = testKey("resize");
    const std::string done = tempFile("resize");
    const std::vector<std::string> onePermit{"--uri", server.uri(), "--permits", "1", "--capacity", "1", key, "--"};
    Cli holder(concat(onePermit, untilExists(done, "true")));
    REQUIRE(holder.readLine() == std::optional<std::string>("ready"));
    Cli waiter(concat(onePermit, {"sh", "-c", "echo ready"}));
    REQUIRE(eventually([&] {
      Cli shown({"--uri", server.uri(), "status", key});
      return shown.wait() == 0 && shown.out().find("waiters:       1\n") != std::string::npos;
    }));

    Cli resize({"--uri", server.uri(), "resize", key, "2"});
    const int resized = resize.wait();
    CAPTURE(resize.err());
    CHECK(resized == 0);
    const std::string& out = resize.out();
    CAPTURE(out);
    CHECK(out.find("semaphore:     '" + key + "'\n") != std::string::npos);
    CHECK(out.find("capacity:      2 (was 1)\n") != std::string::npos);
    CHECK(out.find("admitted:      1 waiter(s)\n") != std::string::npos);
    CHECK(out.find("kept:          fence_ttl (24h by default) from the semaphore's last change") != std::string::npos);
    CHECK(waiter.readLine() == std::optional<std::string>("ready"));  // admitted beside the holder
    CHECK(waiter.wait() == 0);

    // The old capacity is refused now, and the message names the ways to change it and its life.
    Cli old(concat(onePermit, {"true"}));
    CHECK(old.wait() == 2);
    CAPTURE(old.err());
    CHECK(old.err().find("stored with capacity 2, not 1") != std::string::npos);
    CHECK(old.err().find("Semaphore::resize (or the command `dlock resize " + key + " 1`)") != std::string::npos);
    CHECK(old.err().find("fence_ttl (24h by default)") != std::string::npos);
    Cli matching({"--uri", server.uri(), "--no-wait", "--permits", "1", "--capacity", "2", key, "--", "true"});
    CHECK(matching.wait() == 0);

    std::ofstream(done).put('\n');
    CHECK(holder.wait() == 0);
    std::remove(done.c_str());
  }

  TEST_CASE("resize of a name with no stored capacity stores nothing and exits 1, bad N 2, an unreachable server 125") {
    RedisProcess server;
    const std::string key = testKey("resize-none");
    Cli none({"--uri", server.uri(), "resize", key, "3"});
    CHECK(none.wait() == 1);
    CHECK(none.out().empty());
    CHECK(none.err().find("no capacity is stored for the semaphore '" + key + "'") != std::string::npos);
    Cli status({"--uri", server.uri(), "status", key});
    CHECK(status.wait() == 1);
    CHECK(status.out().find("kind:          exclusive\n") != std::string::npos);  // no semaphore was made

    Cli bad({"--uri", server.uri(), "resize", key, "0"});
    CHECK(bad.wait() == 2);
    CHECK(bad.err().find("is not a number of permits from 1 to 1000000") != std::string::npos);
    CHECK(bad.err().find("Usage: dlock") != std::string::npos);

    const std::string nobody = "redis://127.0.0.1:" + std::to_string(dlock::test::freeLoopbackPort());
    Cli unreachable({"--uri", nobody, "resize", key, "3"});
    CHECK(unreachable.wait() == 125);
    CHECK_FALSE(unreachable.err().empty());
  }

  TEST_CASE("--permits: another capacity for a stored semaphore exits 2 naming both, --no-wait on none free gives 1") {
    RedisProcess server;
    const std::string key = testKey("capacity");
    const std::string done = tempFile("capacity");
    Cli holder({"--uri", server.uri(), "--permits", "2", "--capacity", "2", key, "--", "sh", "-c",
                "echo ready; while [ ! -e '" + done + "' ]; do sleep 0.05; done"});
    REQUIRE(holder.readLine() == std::optional<std::string>("ready"));
    Cli other({"--uri", server.uri(), "--permits", "1", "--capacity", "3", key, "--", "true"});
    const int status = other.wait();
    CAPTURE(other.err());  // a sanitizer's report too (TSan exits 66)
    CHECK(status == 2);
    CHECK(other.err().find("stored with capacity 2, not 3") != std::string::npos);
    Cli full({"--uri", server.uri(), "--no-wait", "--permits", "1", "--capacity", "2", key, "--", "true"});
    CHECK(full.wait() == 1);
    std::ofstream(done).put('\n');
    CHECK(holder.wait() == 0);
    std::remove(done.c_str());
  }
}
