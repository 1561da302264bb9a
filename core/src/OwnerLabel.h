// SPDX-License-Identifier: Apache-2.0
// OwnerLabel.h — the owner label a lock records with each acquisition when asked
// (LockOptions::ownerLabel): who holds the lease, for people reading `dlock status`.
#pragma once

#include <string>
#include <string_view>

namespace dlock::detail {

// "host=<this host's name> pid=<this process's id>", then " <text>" when `text` is not empty.
// Made at each acquisition, so a forked child records its own pid.
[[nodiscard]] std::string ownerLabel(std::string_view text);

}  // namespace dlock::detail
