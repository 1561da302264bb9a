// SPDX-License-Identifier: Apache-2.0
// Builds against dlock's source tree as a subproject: the header-only API and its errors.
#include <dlock/LockError.h>
#include <dlock/Validation.h>

int main() {
  try {
    dlock::detail::checkKey("", "subproject");
  } catch (const dlock::LockError&) {
    return dlock::kMaxKeyBytes == 1024 ? 0 : 1;
  }
  return 1;
}
