// SPDX-License-Identifier: Apache-2.0
// CliArgs.h — the command line of the `dlock` command, parsed into plain values.
//
//   CliOptions     what one invocation asks for: run a command under a lock, show a key's status,
//                  resize a semaphore, print the help or the version
//   parseArgs()    argv (without argv[0]) and $DLOCK_URI → CliOptions; UsageError when malformed
//   durations      dlock::parseDuration (<dlock/duration.h>) with BareNumber::Seconds: "500ms", "30s",
//                  "2m", "1h", "1.5s", and "10" (seconds, as flock -w takes)
//   uriSecrets / scrubSecrets   the passwords inside URIs, and text with them masked: a second
//                  line of defence for messages dlock did not compose itself (the URIs dlock
//                  prints itself go through dlock::redactUri)
//
// No I/O and no backend here, so all of it is unit-tested (tests/unit/CliArgsTest.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::cli {

// Exit codes of dlock itself; everything else is the command's own status.
inline constexpr int kExitStatusFree = 1;   // `dlock status KEY`: KEY is free (0: held)
inline constexpr int kExitNoCapacity = 1;   // `dlock resize KEY N`: no capacity stored for KEY (0: resized)
inline constexpr int kExitUsage = 2;         // bad arguments or a bad URI
inline constexpr int kExitFailure = 125;     // dlock failed: backend unreachable or an error reply
inline constexpr int kExitCannotRun = 126;   // the command exists but cannot be executed
inline constexpr int kExitNotFound = 127;    // the command was not found

inline constexpr const char* kDefaultUri = "redis://127.0.0.1:6379";

// Bad arguments: the message says which, without the program name.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Leader: `dlock leader NAME [--follow]`, who leads the election NAME. Resize: `dlock resize KEY N`.
enum class Mode { Run, Status, Resize, Help, Version, Leader };

// What happens to the command when its lease is lost while it runs.
enum class OnLost {
  Terminate,  // SIGTERM, then SIGKILL after the grace period
  Ignore,     // let it run on (dlock still exits with the lost code)
};

// Which lock of KEY the command runs under: the exclusive lock, or KEY's read-write lock
// (LockBuilder::buildReadWrite) as a reader (--read) or the writer (--write).
enum class Access { Exclusive, Read, Write };

struct CliOptions {
  Mode mode = Mode::Run;
  std::string uri = kDefaultUri;  // --uri, else $DLOCK_URI, else kDefaultUri
  std::string key;
  std::vector<std::string> command;  // Run: COMMAND [ARGS...]
  // The lease the watchdog keeps renewing (every third of it) while the command runs.
  std::chrono::milliseconds ttl{std::chrono::seconds(30)};
  // How long to wait for the key. Unset: as long as it takes; zero: try once (--no-wait).
  std::optional<std::chrono::milliseconds> wait;
  // --fair: a fair lock (LockBuilder::fair): waiters get KEY in the order they asked for it.
  bool fair = false;
  Access access = Access::Exclusive;  // --read, --write
  int conflictExitCode = 1;
  int lostExitCode = 3;
  OnLost onLost = OnLost::Terminate;
  // After SIGTERM on a lost lease, how long the command has before SIGKILL.
  std::chrono::milliseconds grace{std::chrono::seconds(5)};
  bool verbose = false;
  // The owner label recorded with the lease (host, pid, and this text when not empty); unset:
  // none (--no-owner-label).
  std::optional<std::string> ownerLabel = std::string();
  // --permits N --capacity C: hold N of the C permits of the semaphore KEY instead of the lock
  // (a job that may run on at most C hosts at once). Unset: the lock.
  struct Permits {
    std::uint32_t count = 0;
    std::uint32_t capacity = 0;
  };
  std::optional<Permits> permits;
  // --elect NAME: `key` is the election NAME, and COMMAND runs only while this process leads it
  // (dlock::Election; the term's lease is --ttl).
  bool elect = false;
  // `dlock leader NAME --follow`: print each change of leader until interrupted.
  bool follow = false;
  // `dlock resize KEY N`: the capacity to store for the semaphore KEY (Semaphore::resize).
  std::uint32_t capacity = 0;
};

inline constexpr std::chrono::milliseconds kMinTtl{10};
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24 * 365);

// Parses the arguments after argv[0]. `uriFromEnvironment` is $DLOCK_URI (nullptr or empty when
// unset). UsageError names the offending argument.
[[nodiscard]] CliOptions parseArgs(const std::vector<std::string>& args, const char* uriFromEnvironment);

// A duration as the shortest exact text: "2m", "30s", "1500ms".
[[nodiscard]] std::string formatDuration(std::chrono::milliseconds duration);

// How `dlock status` names a holder's token: its first 8 characters and "...". Enough to tell
// holders apart and find one in a log; the rest (96 bits) stays unknown, for a token is the
// right to release.
[[nodiscard]] std::string tokenPrefix(const std::string& token);

// The help text (--help) and the one-line usage (after a usage error).
[[nodiscard]] std::string helpText();
[[nodiscard]] std::string usageText();

// The passwords inside `text` (an argument, or $DLOCK_URI) when it holds a URI: what
// dlock::redactUri masks as passwords (userinfo, sentinel_password), raw and percent-decoded,
// longest first, each once.
[[nodiscard]] std::vector<std::string> uriSecrets(std::string_view text);

// `text` with every occurrence of each secret replaced by "***".
[[nodiscard]] std::string scrubSecrets(std::string text, const std::vector<std::string>& secrets);

}  // namespace dlock::cli
