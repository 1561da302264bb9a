// SPDX-License-Identifier: Apache-2.0
// Token.h — owner tokens: 128 bits from the kernel's CSPRNG (getrandom), as 32 lowercase hex
// digits. A token names one acquisition; nobody can guess it, so nobody else can release it.
#pragma once

#include <string>

namespace dlock {

// A fresh token. Throws LockError if the kernel's random source fails (it does not block once
// the system has booted).
[[nodiscard]] std::string generateToken();

}  // namespace dlock
