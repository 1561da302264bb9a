// SPDX-License-Identifier: Apache-2.0
// The new user's first program, built by scripts/try against an installed dlock (once with
// find_package, once with plain pkg-config): lock a key on a real server through the README's
// guard, and show what a wrong password does at connect.
//
//   try_dlock URI            takes "try:key" with a ScopedLock, prints "held, fencing token N"
//   try_dlock --refused URI  expects connect() to refuse URI; prints the error, exits 0 if it did
#include <cstdio>
#include <cstring>
#include <string>

#include <dlock/dlock.h>

int main(int argc, char** argv) {
  const bool refused = argc == 3 && std::strcmp(argv[1], "--refused") == 0;
  if (argc != 2 && !refused) {
    std::fprintf(stderr, "usage: try_dlock [--refused] URI\n");
    return 2;
  }
  const char* uri = argv[argc - 1];
  try {
    auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).build();
    if (refused) {
      std::fprintf(stderr, "connect(%s) succeeded; expected a refusal\n", dlock::redactUri(uri).c_str());
      return 1;
    }
    dlock::ScopedLock guard(*lock, "try:key", std::chrono::seconds(2));
    if (!guard) {
      std::fprintf(stderr, "try:key is busy\n");
      return 1;
    }
    std::printf("held, fencing token %llu (dlock %s)\n", static_cast<unsigned long long>(guard.fencingToken()),
                DLOCK_VERSION);
    return 0;
  } catch (const dlock::LockError& error) {
    std::printf("%s\n", error.what());
    return refused ? 0 : 1;
  }
}
