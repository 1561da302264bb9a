// SPDX-License-Identifier: Apache-2.0
// Leader.h — the election forms of `dlock`: `leader NAME [--follow]` prints who leads the
// election NAME; `--elect NAME -- COMMAND` runs COMMAND while this host leads it (main.cpp runs
// it as a command under a hold, with a TermHold).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "CliArgs.h"
#include "dlock/IOperator.h"
#include "dlock/LockStats.h"
#include "dlock/core/Election.h"

namespace dlock::cli {

// The election options.key names, its terms' lease options.ttl.
[[nodiscard]] std::shared_ptr<dlock::Election> makeElection(const std::shared_ptr<dlock::IOperator>& backend,
                                                            const CliOptions& options);

// What a candidate of this dlock proclaims: "host=<name> pid=<id>", then the owner label's text.
[[nodiscard]] std::string candidateValue(const CliOptions& options);

// `dlock leader NAME`: prints the leader; 0 when there is one, kExitStatusFree when none. With
// --follow, prints each change until SIGINT, SIGTERM or SIGHUP, then dies by that signal.
int printLeader(const std::shared_ptr<dlock::IOperator>& backend, const CliOptions& options);

// A term as the command's hold: release() resigns (LockLostError when it had ended).
class TermHold {
 public:
  TermHold() = default;
  explicit TermHold(dlock::Leadership term) : term_(std::move(term)) {}

  void release() { term_.resign(); }
  [[nodiscard]] std::chrono::steady_clock::time_point validUntil() const { return term_.validUntil(); }
  [[nodiscard]] std::uint64_t fencingToken() const { return term_.fencingToken(); }
  explicit operator bool() const noexcept { return static_cast<bool>(term_); }

 private:
  dlock::Leadership term_;
};

// The election as the command's lock for --verbose: an election counts no renewals of its own.
struct ElectionStatsView {
  [[nodiscard]] dlock::LockStats stats() const { return {}; }
};

}  // namespace dlock::cli
