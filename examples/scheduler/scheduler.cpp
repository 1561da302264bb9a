// SPDX-License-Identifier: Apache-2.0
// dlock_example_scheduler — a pre-fork server whose workers elect the one that runs the
// scheduler: every worker of every instance is a candidate, one leads at a time.
//
//   dlock_example_scheduler [--instance a] [--workers 4] [--lease-ms 1000] --uri redis://HOST:PORT
//
// The instance forks its workers (each dies with it: PR_SET_PDEATHSIG) and waits for them. A
// worker builds its own election after the fork, campaigns, and while it leads runs the scheduler:
// a tick every 50 ms, each written with its term to `scheduler:term` through a fenced write (a
// term lower than the stored one is refused, so a paused old leader changes nothing). It prints
// "leading instance=<name> worker=<n> term=<term>" when its term starts, and "lost ..." when it
// ends, then campaigns again.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "../common/AppRedis.h"
#include "dlock/connect.h"
#include "dlock/core/Election.h"

namespace {

using examples::AppRedis;

// The fenced store: only a term at least as high as the stored one is written.
constexpr const char* kFencedWrite =
    "local stored = tonumber(redis.call('GET', KEYS[1]) or '0') "
    "if tonumber(ARGV[1]) < stored then return 0 end "
    "redis.call('SET', KEYS[1], ARGV[1]) return 1";

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());  // one short write: lines of several processes stay whole
  std::fflush(stdout);
}

[[noreturn]] void work(const std::string& uri, const std::string& who, std::chrono::milliseconds lease) {
  // Built in the worker, after the fork: the election and its connections are this process's.
  auto election = dlock::ElectionBuilder().backend(dlock::connect(uri)).name("scheduler").lease(lease).build();
  AppRedis store(uri);
  while (true) {
    dlock::Leadership term = election->campaign(who);
    const std::string number = std::to_string(term.fencingToken());
    say("leading " + who + " term=" + number);
    while (term.isLeader()) {
      const auto written = store.command({"EVAL", kFencedWrite, "1", "scheduler:term", number});
      if (written.integer != 1) break;  // a later term wrote: ours has ended
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    say("lost " + who + " term=" + number);
  }
}

int run(const examples::CommandLine& args) {
  const std::string instance = args.text("instance", "a");
  const int workers = args.number("workers", 4);
  const auto lease = std::chrono::milliseconds(args.number("lease-ms", 1000));
  if (workers < 1) throw examples::UsageError("--workers must be at least 1");
  for (int n = 0; n < workers; ++n) {
    const pid_t pid = ::fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the instance's workers end with it
      if (::getppid() == 1) ::_exit(1);     // it ended already
      try {
        work(args.uri(), "instance=" + instance + " worker=" + std::to_string(n), lease);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "worker %d failed: %s\n", n, error.what());
        ::_exit(1);
      }
    }
  }
  int status = 0;
  while (::wait(&status) > 0) {
  }
  return 1;  // the workers run until killed
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(examples::CommandLine(argc, argv));
  } catch (const examples::UsageError& error) {
    std::fprintf(stderr,
                 "dlock_example_scheduler: %s\n"
                 "usage: dlock_example_scheduler [--instance a] [--workers 4] [--lease-ms 1000]\n"
                 "                               --uri redis://HOST:PORT (or DLOCK_URI)\n",
                 error.what());
    return 2;
  }
}
