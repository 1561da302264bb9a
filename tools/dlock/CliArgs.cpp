// SPDX-License-Identifier: Apache-2.0
#include "CliArgs.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <map>

#include "dlock/ISemaphoreOperator.h"
#include "dlock/Validation.h"
#include "dlock/duration.h"
#include "dlock/uri.h"

namespace dlock::cli {
namespace {

using std::chrono::milliseconds;

std::optional<int> parseExitCode(std::string_view text) {
  int value = 0;
  const auto* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0 || value > 255) return std::nullopt;
  return value;
}

// Options and whether they take a value. Short forms follow flock(1): -n, -w, -E.
struct OptionSpec {
  const char* name;
  bool takesValue;
  bool forStatus;  // meaningful for `dlock status KEY` too
};

const std::map<std::string, OptionSpec>& optionSpecs() {
  static const std::map<std::string, OptionSpec> specs = {
      {"--uri", {"--uri", true, true}},
      {"--ttl", {"--ttl", true, false}},
      {"--wait", {"--wait", true, false}},
      {"-w", {"--wait", true, false}},
      {"--no-wait", {"--no-wait", false, false}},
      {"-n", {"--no-wait", false, false}},
      {"--fair", {"--fair", false, false}},
      {"--read", {"--read", false, false}},
      {"--write", {"--write", false, false}},
      {"--conflict-exit-code", {"--conflict-exit-code", true, false}},
      {"-E", {"--conflict-exit-code", true, false}},
      {"--lost-exit-code", {"--lost-exit-code", true, false}},
      {"--on-lost", {"--on-lost", true, false}},
      {"--grace", {"--grace", true, false}},
      {"--permits", {"--permits", true, false}},
      {"--capacity", {"--capacity", true, false}},
      {"--owner-label", {"--owner-label", true, false}},
      {"--no-owner-label", {"--no-owner-label", false, false}},
      {"--elect", {"--elect", true, false}},
      {"--follow", {"--follow", false, true}},
      {"--verbose", {"--verbose", false, true}},
      {"-v", {"--verbose", false, true}},
      {"--help", {"--help", false, true}},
      {"-h", {"--help", false, true}},
      {"--version", {"--version", false, true}},
  };
  return specs;
}

milliseconds durationArgument(const std::string& option, const std::string& value) {
  const auto duration = dlock::parseDuration(value, BareNumber::Seconds, kMaxDuration);
  if (!duration) {
    throw UsageError(option + ": '" + value + "' is not a duration (e.g. 500ms, 30s, 2m)");
  }
  return *duration;
}

int exitCodeArgument(const std::string& option, const std::string& value) {
  const auto code = parseExitCode(value);
  if (!code) throw UsageError(option + ": '" + value + "' is not an exit status from 0 to 255");
  return *code;
}

std::uint32_t countArgument(const std::string& option, const std::string& value) {
  std::uint32_t count = 0;
  const auto* end = value.data() + value.size();
  const auto [ptr, ec] = std::from_chars(value.data(), end, count);
  if (value.empty() || ec != std::errc() || ptr != end || count == 0 || count > kMaxSemaphorePermits) {
    throw UsageError(option + ": '" + value + "' is not a number of permits from 1 to " +
                     std::to_string(kMaxSemaphorePermits));
  }
  return count;
}

// --permits N and --capacity C, given together, N at most C; --fair adds nothing to them.
std::optional<CliOptions::Permits> permitsArguments(const std::map<std::string, std::string>& given, bool fair) {
  const auto count = given.find("--permits");
  const auto capacity = given.find("--capacity");
  if (count == given.end() && capacity == given.end()) return std::nullopt;
  if (count == given.end() || capacity == given.end()) throw UsageError("--permits and --capacity go together");
  if (fair) throw UsageError("--fair does not apply to --permits: permit waiters are served in order already");
  CliOptions::Permits permits{countArgument("--permits", count->second), countArgument("--capacity", capacity->second)};
  if (permits.count > permits.capacity) {
    throw UsageError("--permits " + count->second + " is more than --capacity " + capacity->second);
  }
  return permits;
}

void checkKeyArgument(const std::string& key) {
  if (key.empty()) throw UsageError("KEY is empty");
  if (key.size() > kMaxKeyBytes) {
    throw UsageError("KEY has " + std::to_string(key.size()) + " bytes, more than the limit of " +
                     std::to_string(kMaxKeyBytes));
  }
}

// --read and --write: true when `canonical` was one of them (recorded in `options`).
bool parseAccessOption(const std::string& canonical, CliOptions& options) {
  if (canonical != "--read" && canonical != "--write") return false;
  const Access access = canonical == "--read" ? Access::Read : Access::Write;
  if (options.access != Access::Exclusive && options.access != access) {
    throw UsageError("--read and --write exclude each other");
  }
  options.access = access;
  return true;
}

// What --read or --write excludes, once every option is read.
void checkAccessOptions(const CliOptions& options) {
  if (options.access == Access::Exclusive) return;
  const char* flag = options.access == Access::Read ? "--read" : "--write";
  if (options.fair) throw UsageError(std::string("--fair does not apply to ") + flag + ": a read-write lock is always fair");
}

}  // namespace

std::string tokenPrefix(const std::string& token) {
  constexpr std::size_t kShown = 8;
  return token.size() <= kShown ? std::string(token.size(), '*') : token.substr(0, kShown) + "...";
}

std::string formatDuration(milliseconds duration) {
  const auto count = duration.count();
  if (count != 0 && count % 3'600'000 == 0) return std::to_string(count / 3'600'000) + "h";
  if (count != 0 && count % 60'000 == 0) return std::to_string(count / 60'000) + "m";
  if (count != 0 && count % 1000 == 0) return std::to_string(count / 1000) + "s";
  return std::to_string(count) + "ms";
}

namespace {

// `dlock [OPTIONS] --elect NAME -- COMMAND`: no KEY, and none of a lock's kinds or waits.
CliOptions electArguments(CliOptions options, const std::vector<std::string>& positionals, bool separator,
                          bool waitGiven) {
  if (!positionals.empty()) throw UsageError("--elect NAME takes no KEY: '" + positionals.front() + "'");
  if (!separator) throw UsageError("expected '--' between --elect NAME and COMMAND");
  if (options.command.empty()) throw UsageError("no COMMAND after '--'");
  if (options.command.front().empty()) throw UsageError("COMMAND is empty");
  if (options.fair || options.access != Access::Exclusive || options.permits) {
    throw UsageError("--elect excludes --fair, --read, --write and --permits: candidates are served in order already");
  }
  if (waitGiven) throw UsageError("--elect waits until this host leads: --wait and --no-wait do not apply");
  checkKeyArgument(options.key);
  options.mode = Mode::Run;
  return options;
}

}  // namespace

CliOptions parseArgs(const std::vector<std::string>& args, const char* uriFromEnvironment) {
  CliOptions options;
  if (uriFromEnvironment != nullptr && *uriFromEnvironment != '\0') options.uri = uriFromEnvironment;

  std::vector<std::string> positionals;
  std::vector<std::string> runOnlyOptions;  // given, and meaningless for `status`
  bool separator = false;
  bool waitGiven = false;
  bool noWaitGiven = false;
  bool ownerLabelGiven = false;
  bool noOwnerLabelGiven = false;
  std::map<std::string, std::string> permitsGiven;  // --permits, --capacity

  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      separator = true;
      options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      positionals.push_back(arg);
      continue;
    }
    // --name=value or --name value.
    std::string name = arg;
    std::optional<std::string> value;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const auto spec = optionSpecs().find(name);
    if (spec == optionSpecs().end()) throw UsageError("unknown option '" + name + "'");
    const std::string canonical = spec->second.name;
    if (spec->second.takesValue) {
      if (!value) {
        if (i + 1 >= args.size() || args[i + 1] == "--") throw UsageError(canonical + " needs a value");
        value = args[++i];
      }
    } else if (value) {
      throw UsageError(canonical + " takes no value");
    }
    if (!spec->second.forStatus) runOnlyOptions.push_back(canonical);

    if (canonical == "--help") {
      options.mode = Mode::Help;
      return options;
    }
    if (canonical == "--version") {
      options.mode = Mode::Version;
      return options;
    }
    if (canonical == "--uri") {
      if (value->empty()) throw UsageError("--uri is empty");
      options.uri = *value;
    } else if (canonical == "--ttl") {
      options.ttl = durationArgument(canonical, *value);
      if (options.ttl < kMinTtl) {
        throw UsageError("--ttl must be at least " + formatDuration(kMinTtl) + ", got '" + *value + "'");
      }
    } else if (canonical == "--wait") {
      options.wait = durationArgument(canonical, *value);
      waitGiven = true;
    } else if (canonical == "--no-wait") {
      options.wait = milliseconds(0);
      noWaitGiven = true;
    } else if (canonical == "--fair") {
      options.fair = true;
    } else if (canonical == "--conflict-exit-code") {
      options.conflictExitCode = exitCodeArgument(canonical, *value);
    } else if (canonical == "--lost-exit-code") {
      options.lostExitCode = exitCodeArgument(canonical, *value);
    } else if (canonical == "--on-lost") {
      if (*value == "terminate") {
        options.onLost = OnLost::Terminate;
      } else if (*value == "ignore") {
        options.onLost = OnLost::Ignore;
      } else {
        throw UsageError("--on-lost: '" + *value + "' is neither 'terminate' nor 'ignore'");
      }
    } else if (canonical == "--grace") {
      options.grace = durationArgument(canonical, *value);
    } else if (canonical == "--owner-label") {
      if (value->size() > kMaxOwnerTextBytes) {
        throw UsageError("--owner-label has " + std::to_string(value->size()) + " bytes, more than the limit of " +
                         std::to_string(kMaxOwnerTextBytes));
      }
      options.ownerLabel = *value;
      ownerLabelGiven = true;
    } else if (canonical == "--no-owner-label") {
      options.ownerLabel.reset();
      noOwnerLabelGiven = true;
    } else if (canonical == "--permits" || canonical == "--capacity") {
      permitsGiven[canonical] = *value;
    } else if (canonical == "--elect") {
      options.elect = true;
      options.key = *value;
    } else if (canonical == "--follow") {
      options.follow = true;
    } else if (canonical == "--verbose") {
      options.verbose = true;
    } else {
      (void)parseAccessOption(canonical, options);
    }
  }
  checkAccessOptions(options);
  if (options.access != Access::Exclusive && !permitsGiven.empty()) {
    throw UsageError(std::string(options.access == Access::Read ? "--read" : "--write") +
                     " and --permits exclude each other: a key is a read-write lock or a semaphore");
  }
  if (waitGiven && noWaitGiven) throw UsageError("--wait and --no-wait exclude each other");
  if (ownerLabelGiven && noOwnerLabelGiven) {
    throw UsageError("--owner-label and --no-owner-label exclude each other");
  }
  options.permits = permitsArguments(permitsGiven, options.fair);

  // `dlock leader NAME` has no "--", as status.
  if (!separator && !positionals.empty() && positionals.front() == "leader") {
    if (positionals.size() != 2) throw UsageError("leader takes one NAME");
    if (!runOnlyOptions.empty()) throw UsageError(runOnlyOptions.front() + " does not apply to leader");
    options.mode = Mode::Leader;
    options.key = positionals[1];
    checkKeyArgument(options.key);
    return options;
  }
  // `dlock resize KEY N`, as status: no "--", only --uri and --verbose.
  if (!separator && !positionals.empty() && positionals.front() == "resize") {
    if (positionals.size() != 3) throw UsageError("resize takes a KEY and a capacity N");
    if (!runOnlyOptions.empty()) throw UsageError(runOnlyOptions.front() + " does not apply to resize");
    options.mode = Mode::Resize;
    options.key = positionals[1];
    checkKeyArgument(options.key);
    options.capacity = countArgument("resize " + positionals[1], positionals[2]);
    return options;
  }
  if (options.follow) throw UsageError("--follow applies to 'dlock leader NAME' only");
  if (options.elect) return electArguments(std::move(options), positionals, separator, waitGiven || noWaitGiven);

  // `dlock status KEY` has no "--"; `dlock status -- CMD` locks the key "status".
  if (!separator && !positionals.empty() && positionals.front() == "status") {
    if (positionals.size() != 2) throw UsageError("status takes one KEY");
    if (!runOnlyOptions.empty()) throw UsageError(runOnlyOptions.front() + " does not apply to status");
    options.mode = Mode::Status;
    options.key = positionals[1];
    checkKeyArgument(options.key);
    return options;
  }

  if (positionals.empty()) throw UsageError("no KEY");
  if (positionals.size() > 1 || !separator) {
    throw UsageError(separator ? "expected one KEY before '--', got " + std::to_string(positionals.size())
                               : "expected '--' between KEY and COMMAND");
  }
  if (options.command.empty()) throw UsageError("no COMMAND after '--'");
  if (options.command.front().empty()) throw UsageError("COMMAND is empty");
  options.mode = Mode::Run;
  options.key = positionals.front();
  checkKeyArgument(options.key);
  return options;
}

std::string usageText() {
  return "Usage: dlock [OPTIONS] KEY -- COMMAND [ARGS...]\n"
         "       dlock [--uri URI] status KEY\n"
         "       dlock [OPTIONS] --elect NAME -- COMMAND [ARGS...]\n"
         "       dlock [--uri URI] leader NAME [--follow]\n"
         "       dlock [--uri URI] resize KEY N\n"
         "Try 'dlock --help' for more information.\n";
}

std::string helpText() {
  return R"(Usage: dlock [OPTIONS] KEY -- COMMAND [ARGS...]
       dlock [--uri URI] status KEY
       dlock [OPTIONS] --elect NAME -- COMMAND [ARGS...]
       dlock [--uri URI] leader NAME [--follow]
       dlock [--uri URI] resize KEY N
       dlock --help | --version

Runs COMMAND while holding the distributed lock KEY: flock(1) across hosts. Of all the dlock
commands on the same backend, only one at a time runs its COMMAND under KEY. The lease is
renewed while COMMAND runs; SIGINT, SIGTERM and SIGHUP sent to dlock are passed on to COMMAND;
the lock is released when COMMAND ends, and dlock exits with COMMAND's status (128+N when it was
killed by signal N). If dlock itself ends first (killed, even by SIGKILL, or crashed), COMMAND is
killed with SIGKILL: nothing renews the lease any more, and nobody is left to follow a SIGTERM
with SIGKILL, so COMMAND never runs on unprotected. (Only COMMAND itself: processes it started
are not, and a set-user-ID COMMAND is exempt, as Linux drops the request at its exec.)

Options:
      --uri URI          the backend (default: $DLOCK_URI, else redis://127.0.0.1:6379):
                           redis://[user:password@]host:port[/db], rediss://... (TLS, e.g.
                           ?tls_ca_file=ca.pem), unix:///path/redis.sock, memory://, and the
                           sentinel, cluster and redlock forms this build supports; passwords are
                           never printed
      --ttl D            the lease, renewed every third of it while COMMAND runs (default 30s)
  -w, --wait D           give up when KEY is not had within D (default: wait as long as it takes)
  -n, --no-wait          give up at once when KEY is held
                         While waiting, a backend that cannot be reached (a restart, a failover)
                           is tried again until the end of D; without --wait, for 30s from the
                           first failure of each outage; with --no-wait, not at all
      --fair             wait in line: KEY goes to the waiters in the order they asked (across
                           hosts), handed over by each release; not on a redlock URI
      --read             hold KEY's read-write lock as a reader: any number of readers at once,
                           never beside a writer; in line behind a waiting writer
      --write            hold KEY's read-write lock as the writer: alone, after the readers
                           before it (--read and --write: not on a redlock URI, no owner label)
  -E, --conflict-exit-code N
                         exit status when KEY was not had (default 1)
      --lost-exit-code N exit status when the lease was lost while COMMAND ran, or COMMAND was
                           stopped because its lease could not be renewed (default 3)
      --on-lost terminate|ignore
                         on a lost lease, stop COMMAND (SIGTERM, then SIGKILL after the grace
                         period; the default), or let it finish
      --grace D          time between SIGTERM and SIGKILL on a lost lease (default 5s); when
                           renewals keep failing, COMMAND gets SIGTERM that long (at most a third
                           of --ttl) before the lease ends and SIGKILL when it ends: it never runs
                           past the lease
      --permits N --capacity C
                         hold N of the C permits of the semaphore KEY instead of the lock: at
                           most C permits' worth of commands run at once (waiters in order);
                           C is stored with KEY, and another C for it is refused (exit 2)
                           until dlock resize KEY C changes it (see below)
      --owner-label TEXT record TEXT in the owner label, after this host's name and dlock's
                           pid (dlock status shows them, with since when)
      --no-owner-label   record no owner label
      --elect NAME       instead of KEY: campaign in the election NAME and run COMMAND only while
                           this host leads it; the term's lease is --ttl, a lost term stops
                           COMMAND as a lost lease does, and COMMAND's end resigns (the next
                           candidate leads at once); not with --fair, --read, --write, --permits
                           or a wait
  -v, --verbose          log acquisition, renewals and release on stderr, and who holds KEY
                           (its owner label, as dlock status shows it) when dlock gives up
  -h, --help             show this help and exit
      --version          show the version and exit

Durations: 250us, 500ms, 30s, 2m, 1h, 1.5s; a bare number is seconds, as flock(1) takes it.

dlock status KEY prints "name: value" lines for the kind of key it finds, every line agreeing
with the exit status: 0 when KEY is held, 1 when it is free, so a script can test it:
  if dlock status nightly-report >/dev/null; then echo "running elsewhere"; fi
A holder's token is shown by its first 8 characters (a whole token is the right to release).
An exclusive key (the default or the fair lock):
  key            KEY, quoted
  kind           exclusive
  backend        the URI, its passwords masked
  held           yes or no
  remaining      the holder's lease left (e.g. 29571ms), or - when free
  fencing token  the last token handed out for KEY: the holder's while held (0: never locked)
  owner          the holder's owner label, quoted (host=NAME pid=N [TEXT]), or - when free or
                 when the holder recorded none (a library lock records one only when asked)
  since          when the holder took the lease, by the backend's clock (UTC), or -
A read-write key (--read, --write) with a holder or a waiter:
  key, kind (read-write), backend
  held           yes, by the writer / yes, by N reader(s) / no
  fencing token  the writer's (or the last writer's)
  writer         its token and lease left, or -
  readers        how many, then a line per reader: its token and lease left
  waiters        how many, then a line per waiter, head first: its side and token
A semaphore (--permits): semaphore, kind, backend, held (yes when any permit is held),
permits in use and capacity ("permits: 3 of 4 in use"), then a line per holder (its permits,
token, fencing token and lease left) and per waiter (its permits and token), head first.
--read or --write with --permits exits 2: a key is a read-write lock or a semaphore.

dlock leader NAME prints who leads the election NAME ("leader: VALUE, quoted" and "term: N")
and exits 0, or prints "leader: none" and exits 1. With --follow it prints the leader now, then
a line per change until interrupted: "term N VALUE" for a leader (VALUE quoted), "none" between
terms, and "skipped N" before a line when N terms came and went unseen.

dlock resize KEY N stores the capacity N (1 to 1000000) of the semaphore KEY, for every user at
once (Semaphore::resize): holders keep their permits, waiters that now fit are admitted, and a
command given another --capacity is refused from then on. It prints the capacity before and
after and how many waiters it admitted, and exits 0; when no capacity is stored for KEY it
stores nothing and exits 1 (the first user stores its --capacity). A stored capacity lasts as
long as the semaphore's keys on Redis: fence_ttl (a URI option, 24h by default) from a call that
changed the semaphore (an acquire, a renewal, a release, a leave, a resize to another capacity),
never less than its last lease; such a call renews it only once less than half of fence_ttl is
left, so it is kept 12h to 24h after the last one, and then the first user stores its own.

Exit status (status KEY: 0 held, 1 free; resize KEY N: 0 resized, 1 no capacity stored; leader
NAME: 0 a leader, 1 none; or one of dlock's own below):
  COMMAND's status, or 128+N when COMMAND was killed by signal N
  1    KEY was not had in time (-E N changes it)
  3    COMMAND was not protected to its end (--lost-exit-code N): the lease was lost while
       it ran (also with --on-lost ignore), or renewals kept failing and dlock stopped it
       before the lease ended
  2    bad arguments or URI
  125  dlock failed: backend unreachable (at start, or past the wait's budget above), or an
       error reply
  126  COMMAND cannot be executed; 127 COMMAND not found

Examples:
  # A cron job started on every host at once: one runs it, the others skip it while it runs.
  dlock --no-wait --uri redis://locks.internal:6379 nightly-report -- /usr/local/bin/report

  # Wait at most 2 minutes for the migration lock; exit 75 if it is still held by then.
  export DLOCK_URI=redis://10.0.0.5:6379/2
  dlock --wait 2m -E 75 db-migrate -- ./migrate.sh --apply

  # Who holds it, and for how long?
  dlock status db-migrate

  # A backup that may run on at most 2 hosts at once; the others wait their turn.
  dlock --permits 1 --capacity 2 nightly-backup -- /usr/local/bin/backup

  # The scheduler runs on one host at a time; another takes over when it dies or resigns.
  dlock --ttl 10s --elect scheduler -- /usr/local/bin/scheduler
  dlock leader scheduler --follow

  # From now on 3 at once (the hosts then ask with --capacity 3).
  dlock resize nightly-backup 3
)";
}

std::vector<std::string> uriSecrets(std::string_view text) {
  std::vector<std::string> secrets;
  if (text.find("://") == std::string_view::npos) return secrets;  // no URI: "user@host" is no password
  // What dlock's own messages mask, so a password holding '/', '?', '@' or ';' (which breaks the
  // URI, and so reaches an error message) is found whole.
  for (const std::string& secret : dlock::uriPasswords(text)) {
    secrets.push_back(secret);
    const auto decoded = dlock::percentDecode(secret);
    if (decoded && *decoded != secret && !decoded->empty()) secrets.push_back(*decoded);
  }
  // Longest first, so a secret containing another is masked whole.
  std::sort(secrets.begin(), secrets.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  secrets.erase(std::unique(secrets.begin(), secrets.end()), secrets.end());
  return secrets;
}

std::string scrubSecrets(std::string text, const std::vector<std::string>& secrets) {
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t pos = text.find(secret); pos != std::string::npos; pos = text.find(secret, pos + 3)) {
      text.replace(pos, secret.size(), "***");
    }
  }
  return text;
}

}  // namespace dlock::cli
