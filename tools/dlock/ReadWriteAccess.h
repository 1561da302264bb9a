// SPDX-License-Identifier: Apache-2.0
// ReadWriteAccess.h — what `dlock --read`/`--write` and `dlock status` add for a key's read-write
// lock (ReadWriteLock.h): the lock the command runs under, and the lines status prints about the
// readers, the writer and the waiters (IReadWriteOperator::inspectReadWrite). Tokens are never
// printed: a token is the right to release.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "CliArgs.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/core/LockBuilder.h"

namespace dlock::cli {

// The lock options.access asks for: builder.build(), or the read or write side of
// builder.buildReadWrite() (ConfigError on a backend without a read-write queue).
[[nodiscard]] std::shared_ptr<dlock::ILock> buildLockFor(const dlock::LockBuilder& builder, const CliOptions& options);

// `dlock status` of a read-write key: `held` when a writer or a reader holds it; the lines,
// "name: value" as the others, agree with it:
//   held           "yes, by the writer", "yes, by 2 reader(s)" or "no"
//   fencing token  the writer's (or the last writer's)
//   writer         its token and lease left, or -
//   readers        how many, then a line per reader: its token and lease left
//   waiters        how many, then a line per waiter, head first: its side and token
struct ReadWriteStatus {
  bool held = false;
  std::string text;
};
// nullopt when the backend has no read-write locks or `key` has none now (no holder, no waiter).
[[nodiscard]] std::optional<ReadWriteStatus> readWriteStatus(dlock::IOperator& backend, const std::string& key);

// Who holds `key`'s read-write lock, for the message of a wait that gave up.
[[nodiscard]] std::string readWriteHolderText(dlock::IOperator& backend, const std::string& key);

}  // namespace dlock::cli
