// SPDX-License-Identifier: Apache-2.0
// The main of every suite whose tests talk to real servers they start themselves (integration,
// topology, examples).
// DLOCK_SKIP_INTEGRATION=1 is the only way to skip them; it says so and exits 77, which ctest
// reports as Skipped. A missing or broken redis-server is a failure, never a skip.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--list", 6) == 0 || std::strncmp(argv[i], "-ltc", 4) == 0) listing = true;
  }
  const char* skip = std::getenv("DLOCK_SKIP_INTEGRATION");
  if (!listing && skip != nullptr && std::strcmp(skip, "1") == 0) {
    std::puts("SKIPPED: DLOCK_SKIP_INTEGRATION=1 — no Redis tests ran");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
