// SPDX-License-Identifier: Apache-2.0
#include "Leader.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>

#include "Supervisor.h"
#include "dlock/Validation.h"

namespace dlock::cli {
namespace {

std::mutex outputMutex;

// One line on stdout, flushed: a follower's reader sees each change as it comes.
void printLine(const std::string& line) {
  std::lock_guard<std::mutex> guard(outputMutex);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

std::string quotedValue(const std::string& value) {
  return dlock::detail::quoteText(value, dlock::kMaxLeaderValueBytes);
}

}  // namespace

std::shared_ptr<dlock::Election> makeElection(const std::shared_ptr<dlock::IOperator>& backend,
                                              const CliOptions& options) {
  return dlock::ElectionBuilder().backend(backend).name(options.key).lease(options.ttl).build();
}

std::string candidateValue(const CliOptions& options) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::string value = "host=" + std::string(host) + " pid=" + std::to_string(::getpid());
  if (options.ownerLabel && !options.ownerLabel->empty()) value += " " + *options.ownerLabel;
  return value;
}

int printLeader(const std::shared_ptr<dlock::IOperator>& backend, const CliOptions& options) {
  if (!options.follow) {
    auto election = makeElection(backend, options);
    const std::optional<dlock::LeaderInfo> leader = election->leader();
    if (!leader) {
      printLine("leader: none");
      return kExitStatusFree;
    }
    printLine("leader: " + quotedValue(leader->value));
    printLine("term: " + std::to_string(leader->term));
    return 0;
  }
  // Blocked before any thread starts, so only sigwait below takes them.
  sigset_t stops;
  sigemptyset(&stops);
  for (const int signo : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, signo);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);
  auto election = makeElection(backend, options);
  auto watch = election->observe([](const dlock::LeaderInfo& now) {
    if (now.skippedTerms > 0) printLine("skipped " + std::to_string(now.skippedTerms));
    printLine(now.hasLeader ? "term " + std::to_string(now.term) + " " + quotedValue(now.value) : "none");
  });
  int signo = 0;
  while (sigwait(&stops, &signo) != 0) {
  }
  watch.stop();
  Supervisor::dieBySignal(signo);
}

}  // namespace dlock::cli
