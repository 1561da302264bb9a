// SPDX-License-Identifier: Apache-2.0
// Locks and unlocks a key on the in-memory backend through the installed dlock.
#include <dlock/dlock.h>

int main() {
  auto lock = dlock::LockBuilder().backend(dlock::connect("memory://")).build();
  if (!lock->tryLock("package-test")) return 1;
  const bool held = lock->isHeld("package-test");
  lock->unlock("package-test");
  return held && !lock->isHeld("package-test") ? 0 : 1;
}
