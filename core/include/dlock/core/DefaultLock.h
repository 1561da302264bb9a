// SPDX-License-Identifier: Apache-2.0
// DefaultLock.h — the process-wide lock the DISTRIBUTED_LOCK macros use.
// Set once at start-up with setDefaultLock(); a macro used before that throws ConfigError.
// Thread safety: thread-safe.
#pragma once

#include <memory>

#include "dlock/ILock.h"

namespace dlock {

// Installs the default lock. ConfigError if one is already set or `lock` is null.
void setDefaultLock(std::shared_ptr<ILock> lock);

// The default lock; ConfigError when none was set.
[[nodiscard]] std::shared_ptr<ILock> defaultLock();

// Removes the default lock (for shutdown and tests); a later setDefaultLock() may install another.
void resetDefaultLock() noexcept;

}  // namespace dlock
