// SPDX-License-Identifier: Apache-2.0
// ReadWriteAccess.h — what `dlock --read`/`--write` and `dlock status` add for a key's read-write
// lock (ReadWriteLock.h): the lock the command runs under, and the lines status prints about the
// readers, the writer and the waiters (IReadWriteOperator::inspectReadWrite). Tokens are never
// printed: a token is the right to release.
#pragma once

#include <memory>
#include <string>

#include "CliArgs.h"
#include "dlock/ILock.h"
#include "dlock/IOperator.h"
#include "dlock/core/LockBuilder.h"

namespace dlock::cli {

// The lock options.access asks for: builder.build(), or the read or write side of
// builder.buildReadWrite() (ConfigError on a backend without a read-write queue).
[[nodiscard]] std::shared_ptr<dlock::ILock> buildLockFor(const dlock::LockBuilder& builder, const CliOptions& options);

// Status lines for `key`'s read-write lock, "name: value" as the others:
//   writer         its lease left, or -
//   readers        how many, then each one's lease left ("2 (29571ms, 12040ms)"), or 0
//   waiters        how many, then each one's side, head first ("2 (write, read)"), or 0
// Empty when the backend has no read-write lock or `key` has none now. `held` is set when a
// writer or a reader holds it.
[[nodiscard]] std::string readWriteStatusLines(dlock::IOperator& backend, const std::string& key, bool& held);

// Who holds `key`'s read-write lock, for the message of a wait that gave up.
[[nodiscard]] std::string readWriteHolderText(dlock::IOperator& backend, const std::string& key);

}  // namespace dlock::cli
