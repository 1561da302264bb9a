// SPDX-License-Identifier: Apache-2.0
// dlock — runs a command while holding a distributed lock: flock(1) across hosts.
//
//   dlock [OPTIONS] KEY -- COMMAND [ARGS...]     see `dlock --help`
//   dlock [--uri URI] status KEY
//   dlock [OPTIONS] --elect NAME -- COMMAND     dlock [--uri URI] leader NAME [--follow]
//   dlock [--uri URI] resize KEY N
//
// The parts: CliArgs (the command line), Supervisor (the child, its signals, the lost lease) and
// this file, which wires them to an ILock. Messages go through the `dlock` spdlog logger, whose
// sink masks every password found in the arguments before anything reaches the terminal.
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "Acquire.h"
#include "CliArgs.h"
#include "Leader.h"
#include "ReadWriteAccess.h"
#include "Permits.h"
#include "Supervisor.h"
#include "dlock/ILock.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/uri.h"
#include "dlock/version.h"

namespace {

using namespace dlock::cli;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// The backend of URI, checked now; its errors do not suggest lazy_connect, which the command lacks.
std::shared_ptr<dlock::IOperator> connectBackend(const std::string& uri) {
  dlock::ConnectOptions options;
  options.suggestLazy = false;
  return dlock::connect(uri, options);
}

// Writes formatted log lines to stderr with the secrets masked.
class ScrubbingStderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  explicit ScrubbingStderrSink(std::vector<std::string> secrets) : secrets_(std::move(secrets)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t formatted;
    formatter_->format(msg, formatted);
    const std::string text = scrubSecrets(std::string(formatted.data(), formatted.size()), secrets_);
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  const std::vector<std::string> secrets_;
};

// The `dlock` logger, registered before the library looks it up, so the library's warnings come
// out here too. --verbose adds dlock's own account at info (the library's debug lines would
// repeat it).
std::shared_ptr<spdlog::logger> makeLogger(bool verbose, std::vector<std::string> secrets) {
  auto logger = std::make_shared<spdlog::logger>("dlock", std::make_shared<ScrubbingStderrSink>(std::move(secrets)));
  logger->set_pattern(verbose ? "[%H:%M:%S.%e] %v" : "%v");
  logger->set_level(verbose ? spdlog::level::info : spdlog::level::warn);
  spdlog::register_logger(logger);
  return logger;
}

// A command line for messages, arguments quoted where a shell would need it.
std::string shellText(const std::vector<std::string>& command) {
  std::string text;
  for (const auto& arg : command) {
    if (!text.empty()) text += ' ';
    const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,+@%", c) != nullptr;
    });
    if (plain) {
      text += arg;
      continue;
    }
    text += '\'';
    for (const char c : arg) text += c == '\'' ? std::string("'\\''") : std::string(1, c);
    text += '\'';
  }
  return text;
}

std::string describe(const Supervisor::Outcome& outcome) {
  if (outcome.signal != 0) {
    return "was killed by signal " + std::to_string(outcome.signal) + " (" + strsignal(outcome.signal) + ")";
  }
  return "exited with status " + std::to_string(outcome.status);
}

// "2026-11-25T04:53:49.123Z".
std::string utcText(std::chrono::system_clock::time_point when) {
  const auto millis = std::chrono::duration_cast<milliseconds>(when.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(millis / 1000);
  std::tm utc{};
  if (::gmtime_r(&seconds, &utc) == nullptr) return "?";
  char text[40];
  const std::size_t length = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
  return std::string(text, length) + "." + std::to_string(1000 + millis % 1000).substr(1) + "Z";
}

// Prints `text` (its secrets masked); `held` → 0, else kExitStatusFree.
int printStatus(std::string text, bool held, spdlog::logger& log, const std::vector<std::string>& secrets) {
  text = scrubSecrets(std::move(text), secrets);
  if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
    log.error("dlock: writing the status failed: {}", std::strerror(errno));
    return kExitFailure;
  }
  return held ? 0 : kExitStatusFree;  // scriptable: `if dlock status KEY; then ...`
}

int runStatus(const CliOptions& options, spdlog::logger& log, const std::vector<std::string>& secrets) {
  const std::shared_ptr<dlock::IOperator> backend = connectBackend(options.uri);
  if (std::optional<SemaphoreStatus> semaphore = semaphoreStatus(*backend, options)) {
    return printStatus(std::move(semaphore->text), semaphore->inUse, log, secrets);
  }
  std::string text;
  text += "key:           " + dlock::detail::quoteKey(options.key) + "\n";
  if (std::optional<ReadWriteStatus> rw = readWriteStatus(*backend, options.key)) {
    text += "kind:          read-write\n";
    text += "backend:       " + dlock::redactUri(options.uri) + "\n";
    return printStatus(text + rw->text, rw->held, log, secrets);
  }
  // An exclusive key (the default or the fair lock: one holder, one token).
  const dlock::LeaseInfo info = backend->inspect(options.key);
  text += "kind:          exclusive\n";
  text += "backend:       " + dlock::redactUri(options.uri) + "\n";
  text += std::string("held:          ") + (info.held ? "yes" : "no") + "\n";
  text += "remaining:     " + (info.held ? formatDuration(info.remaining) : std::string("-")) + "\n";
  text += "fencing token: " + std::to_string(info.fencingToken) + "\n";
  const bool owned = info.held && !info.owner.empty();
  text += "owner:         " + (owned ? dlock::detail::quoteText(info.owner, dlock::kMaxOwnerLabelBytes) : "-") + "\n";
  text += "since:         " + (owned ? utcText(info.ownerSince) : "-") + "\n";
  return printStatus(std::move(text), info.held, log, secrets);
}

// `dlock resize KEY N`: 0 resized, kExitNoCapacity when no capacity was stored for KEY.
int runResize(const CliOptions& options, spdlog::logger& log, const std::vector<std::string>& secrets) {
  const std::shared_ptr<dlock::IOperator> backend = connectBackend(options.uri);
  std::optional<std::string> text = resizeSemaphore(*backend, options);
  if (!text) {
    log.error("dlock: no capacity is stored for the semaphore {} on {}: nothing resized (its first user stores its "
              "--capacity)",
              dlock::detail::quoteKey(options.key), dlock::redactUri(options.uri));
    return kExitNoCapacity;
  }
  const int written = printStatus(std::move(*text), true, log, secrets);
  log.info("dlock: resized the semaphore {} on {} to {}", dlock::detail::quoteKey(options.key),
           dlock::redactUri(options.uri), options.capacity);
  return written;
}

// Who holds `key`, for the message of a wait that gave up: the owner label the holder recorded
// and since when, as `dlock status` shows it. One more round trip, so only for --verbose; a
// failure to read it is no failure of dlock.
std::string holderText(dlock::IOperator& backend, const std::string& key) {
  dlock::LeaseInfo info;
  try {
    info = backend.inspect(key);
  } catch (const dlock::LockError& error) {
    return "another owner (reading its owner label failed: " + std::string(error.what()) + ")";
  }
  if (!info.held) return "another owner (free again now)";
  const std::string left = formatDuration(info.remaining) + " left";
  if (info.owner.empty()) return "another owner (no owner label recorded; " + left + ")";
  return "another owner, " + dlock::detail::quoteText(info.owner, dlock::kMaxOwnerLabelBytes) + " (since " +
         utcText(info.ownerSince) + "; " + left + ")";
}

// The lease's destructor tries a failed release once more and reports its failure too (Lease.h);
// dlock reported the first one, so the second goes unsaid: the logger is silent for that one call
// (and the library's other threads with it, for at most the call's timeout). `Held`: a Lease or a
// PermitLease, as below.
template <class Held>
void dropAfterReportedFailure(Held& lease, spdlog::logger& log) {
  const spdlog::level::level_enum level = log.level();
  log.set_level(spdlog::level::off);
  lease = Held();
  log.set_level(level);
}

// Releases the key after the command ended; dlock's exit status. The lost code when the command
// did not finish under the lock: the lease was lost, it ended before the release, or dlock stopped
// the command because it was ending unrenewed.
template <class Held>
int releaseAfter(Held& lease, const Supervisor::Outcome& outcome, const CliOptions& options,
                 spdlog::logger& log) {
  const std::string key = dlock::detail::quoteKey(options.key);
  const std::string uri = dlock::redactUri(options.uri);
  bool unprotected = outcome.lost || outcome.stoppedAtLeaseEnd;
  try {
    lease.release();
    log.info("dlock: released {} on {}", key, uri);
  } catch (const dlock::LockLostError&) {
    if (unprotected) {
      log.info("dlock: nothing to release: the lease of {} {}", key, outcome.lost ? "was lost" : "ended unrenewed");
    } else {
      log.error("dlock: the lease of {} on {} had ended before the command did: it ran unprotected", key, uri);
    }
    unprotected = true;
  } catch (const dlock::LockError& error) {
    log.warn("dlock: releasing {} failed: {}; the lease ends on its own within {}", key, error.what(),
             formatDuration(options.ttl));
    dropAfterReportedFailure(lease, log);
  }
  return unprotected ? options.lostExitCode : outcome.status;
}

// Runs the command under the lease and watches both (Supervisor); the command's outcome. `lock`
// (an ILock or a Semaphore) counts the renewals.
template <class Held, class Lock>
Supervisor::Outcome superviseCommand(Supervisor& supervisor, pid_t pid, const Held& lease, Lock& lock,
                                     const CliOptions& options, spdlog::logger& log) {
  const std::string key = dlock::detail::quoteKey(options.key);
  const std::string uri = dlock::redactUri(options.uri);
  const bool terminate = options.onLost == OnLost::Terminate;
  Supervisor::Callbacks callbacks;
  callbacks.onLost = [&](std::uint64_t fencingToken) {
    log.error("dlock: lost the lock {} on {} (fencing token {}) while the command ran; {}", key, uri, fencingToken,
              terminate ? "stopping it (SIGTERM, then SIGKILL after " + formatDuration(options.grace) + ")"
                        : std::string("letting it finish"));
  };
  callbacks.leaseTime = options.ttl;
  callbacks.leaseDeadline = [&lease] { return lease.validUntil(); };
  callbacks.onDeadline = [&](Steady::time_point deadline) {
    log.error("dlock: the lease of {} on {} could not be renewed and ends in {}; stopping the command (SIGTERM, "
              "then SIGKILL when the lease ends)",
              key, uri, formatDuration(std::chrono::ceil<milliseconds>(deadline - Steady::now())));
  };
  std::uint64_t renewalsSeen = 0;
  if (options.verbose) {
    callbacks.tickEvery = std::max(milliseconds(1), options.ttl / 6);
    callbacks.onTick = [&] {
      const std::uint64_t renewals = lock.stats().renewals;
      if (renewals == renewalsSeen) return;
      renewalsSeen = renewals;
      log.info("dlock: renewed the lease of {} for {} ({} renewals so far)", key, formatDuration(options.ttl),
               renewals);
    };
  }
  const Supervisor::Outcome outcome = supervisor.supervise(pid, terminate, options.grace, callbacks);
  log.info("dlock: the command {}", describe(outcome));
  return outcome;
}

// Runs the command while `lease` holds, then releases it; dlock's exit status (releaseAfter).
template <class Held, class Lock>
int runCommandUnder(Supervisor& supervisor, Held& lease, Lock& lock, const CliOptions& options, spdlog::logger& log) {
  Supervisor::SpawnError spawnError;
  const pid_t pid = supervisor.spawn(options.command, spawnError);
  if (pid < 0) {
    log.error("dlock: cannot run '{}': {}", options.command.front(), std::strerror(spawnError.error));
    lease = Held();  // releases quietly
    return spawnError.error == ENOENT ? kExitNotFound : kExitCannotRun;
  }
  log.info("dlock: running {} (pid {})", shellText(options.command), pid);
  const Supervisor::Outcome outcome = superviseCommand(supervisor, pid, lease, lock, options, log);
  return releaseAfter(lease, outcome, options, log);
}

int runLocked(const CliOptions& options, spdlog::logger& log) {
  // First, before the lock starts any thread: every thread must block the supervised signals.
  Supervisor supervisor;

  const std::string key = dlock::detail::quoteKey(options.key);
  const std::string uri = dlock::redactUri(options.uri);
  // One tolerance of an outage for the library's waits (--fair) and dlock's own (in slices).
  const milliseconds outageTolerance = dlock::LockOptions().outageTolerance;
  const std::shared_ptr<dlock::IOperator> backend = connectBackend(options.uri);
  dlock::LockBuilder builder;
  builder.backend(backend).watchdogLease(options.ttl).fair(options.fair).outageTolerance(outageTolerance);
  // The fair lock records no owner label yet: `dlock status` shows its lease and token only.
  if (options.ownerLabel && !options.fair && options.access == Access::Exclusive) builder.ownerLabel(*options.ownerLabel);
  auto lock = buildLockFor(builder, options);
  lock->onLockLost([&supervisor](std::string_view, std::uint64_t fencingToken) { supervisor.notifyLost(fencingToken); });

  Acquired acquired = acquireInterruptibly(lock, options, supervisor, outageTolerance);
  dlock::Lease& lease = acquired.lease;
  if (!acquired.interrupt) acquired.interrupt = supervisor.takeInterrupt();
  if (const std::optional<int> signo = acquired.interrupt) {
    log.info("dlock: signal {} ({}) while waiting for {}; not running the command", *signo, strsignal(*signo), key);
    lease = dlock::Lease();  // releases, if the last slice got the key
    Supervisor::dieBySignal(*signo);
  }
  if (!lease) {
    if (log.should_log(spdlog::level::info)) {
      const milliseconds waited = options.wait.value_or(milliseconds(0));
      log.info("dlock: {} on {} is held by {}; gave up {}", key, uri, options.access == Access::Exclusive ? holderText(*backend, options.key)
                                                                    : readWriteHolderText(*backend, options.key),
               waited.count() == 0 ? std::string("at once") : "after " + formatDuration(waited));
    }
    return options.conflictExitCode;
  }
  log.info("dlock: acquired {} on {} (fencing token {}; lease {}, renewed every {})", key, uri, lease.fencingToken(),
           formatDuration(options.ttl), formatDuration(options.ttl / 3));

  return runCommandUnder(supervisor, lease, *lock, options, log);
}

// `dlock --permits N --capacity C`: runLocked over N permits of the semaphore KEY.
int runWithPermits(const CliOptions& options, spdlog::logger& log) {
  Supervisor supervisor;  // first, as in runLocked
  const std::string key = dlock::detail::quoteKey(options.key);
  const std::string uri = dlock::redactUri(options.uri);
  const milliseconds outageTolerance = dlock::LockOptions().outageTolerance;
  const auto semaphore = makeSemaphore(connectBackend(options.uri), options, outageTolerance);
  semaphore->onPermitsLost(
      [&supervisor](std::string_view, std::uint64_t fencingToken) { supervisor.notifyLost(fencingToken); });
  AcquiredPermits acquired = acquirePermitsInterruptibly(semaphore, options, supervisor);
  dlock::PermitLease& permits = acquired.permits;
  if (!acquired.interrupt) acquired.interrupt = supervisor.takeInterrupt();
  if (const std::optional<int> signo = acquired.interrupt) {
    log.info("dlock: signal {} ({}) while waiting for permits of {}; not running the command", *signo,
             strsignal(*signo), key);
    permits = dlock::PermitLease();  // releases, if the wait got them
    Supervisor::dieBySignal(*signo);
  }
  const std::string wanted = std::to_string(options.permits->count) + " of the " +
                             std::to_string(options.permits->capacity) + " permits of " + key;
  if (!permits) {
    log.info("dlock: {} on {} were not free; gave up", wanted, uri);
    return options.conflictExitCode;
  }
  log.info("dlock: acquired {} on {} (fencing token {}; lease {}, renewed every {})", wanted, uri,
           permits.fencingToken(), formatDuration(options.ttl), formatDuration(options.ttl / 3));
  return runCommandUnder(supervisor, permits, *semaphore, options, log);
}

// `dlock --elect NAME`: runLocked over a term of the election NAME.
int runElected(const CliOptions& options, spdlog::logger& log) {
  Supervisor supervisor;  // first, as in runLocked
  const std::string name = dlock::detail::quoteKey(options.key);
  const std::string uri = dlock::redactUri(options.uri);
  const auto election = makeElection(connectBackend(options.uri), options);
  election->onLost([&supervisor](const dlock::Leadership& lost) { supervisor.notifyLost(lost.fencingToken()); });
  auto [term, interrupt] = waitInOnePiece<TermHold>(
      [election, value = candidateValue(options)] { return TermHold(election->campaign(value)); }, supervisor);
  if (!interrupt) interrupt = supervisor.takeInterrupt();
  if (interrupt) {
    log.info("dlock: signal {} ({}) while campaigning in {}; not running the command", *interrupt,
             strsignal(*interrupt), name);
    term = TermHold();  // resigns, if the campaign won
    Supervisor::dieBySignal(*interrupt);
  }
  log.info("dlock: leading election {} on {} (term {}; lease {}, renewed every {})", name, uri, term.fencingToken(),
           formatDuration(options.ttl), formatDuration(options.ttl / 3));
  ElectionStatsView stats;
  return runCommandUnder(supervisor, term, stats, options, log);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const char* uriFromEnvironment = std::getenv("DLOCK_URI");

  // Every password in the arguments or $DLOCK_URI, masked in everything dlock prints.
  std::vector<std::string> secrets;
  std::vector<std::string> inputs = args;
  if (uriFromEnvironment != nullptr) inputs.emplace_back(uriFromEnvironment);
  for (const auto& input : inputs) {
    for (auto& secret : uriSecrets(input)) secrets.push_back(std::move(secret));
  }
  std::sort(secrets.begin(), secrets.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });

  CliOptions options;
  try {
    options = parseArgs(args, uriFromEnvironment);
  } catch (const UsageError& error) {
    const std::string text = scrubSecrets("dlock: " + std::string(error.what()) + "\n", secrets) + usageText();
    std::fputs(text.c_str(), stderr);
    return kExitUsage;
  }
  switch (options.mode) {
    case Mode::Help:
      std::fputs(helpText().c_str(), stdout);
      return 0;
    case Mode::Version:
      std::printf("dlock %s\n", DLOCK_VERSION);
      return 0;
    case Mode::Run:
    case Mode::Status:
    case Mode::Leader:
    case Mode::Resize:
      break;
  }

  const auto log = makeLogger(options.verbose, secrets);
  try {
    if (options.mode == Mode::Status) return runStatus(options, *log, secrets);
    if (options.mode == Mode::Leader) return printLeader(connectBackend(options.uri), options);
    if (options.elect) return runElected(options, *log);
    if (options.mode == Mode::Resize) return runResize(options, *log, secrets);
    return options.permits ? runWithPermits(options, *log) : runLocked(options, *log);
  } catch (const dlock::ConfigError& error) {
    log->error("{}", error.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    log->error("{}", error.what());
    return kExitFailure;
  }
}
