// SPDX-License-Identifier: Apache-2.0
// Scripts go by EVALSHA with digests dlock computes itself (Digest.cpp, no OpenSSL): each must be
// the server's own SHA-1 of the source, or every call would pay a NOSCRIPT and an EVAL.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "redis/src/ConditionScripts.h"
#include "redis/src/Digest.h"
#include "redis/src/FairScripts.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "redis/src/ReadWriteScripts.h"
#include "redis/src/Scripts.h"
#include "redis/src/SemaphoreScripts.h"

using dlock::detail::sha1Hex;

namespace {

// n bytes of (i * 131 + 7) mod 256: every byte value, high ones included.
std::string bytes(std::size_t n) {
  std::string data(n, '\0');
  for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<char>((i * 131 + 7) % 256);
  return data;
}

}  // namespace

TEST_SUITE("ScriptDigest") {
  TEST_CASE("SHA-1 of the FIPS 180 examples and of lengths around a block's padding") {
    CHECK(sha1Hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
    CHECK(sha1Hex(std::string(1000000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
    // Python's hashlib.sha1 of bytes(n).
    const std::vector<std::pair<std::size_t, const char*>> expected = {
        {0, "da39a3ee5e6b4b0d3255bfef95601890afd80709"},    {1, "5d1be7e9dda1ee8896be5b7e34a85ee16452a7b4"},
        {55, "9e5a20c2604688df0b1eecf4474b58bfe7227881"},   {56, "bd367cf3b85dc2cac8f6b4827cb850e4c83c521c"},
        {63, "a8f606c343b26fa851dfd149f7b12fc2dbf1af34"},   {64, "1abec92bfbde4197236cfba30b6b61c69d605d88"},
        {65, "362ce7bc4bc2b47979741db349c65fd550840dc3"},   {119, "e7ceee9817914eef9ec7001a43033f16a086b7c7"},
        {120, "9c9d46758300bc1f2c6953d4a2652ed72a202cf3"},  {1000, "425b5f2d2d344f4f6467cda9065cdc840619dc2d"}};
    for (const auto& [length, digest] : expected) {
      INFO("length ", length);
      CHECK(sha1Hex(bytes(length)) == digest);
    }
  }

  TEST_CASE("every script's digest is the one the server gives it") {
    dlock::test::RedisProcess server;
    dlock::test::RedisClient client(server.host(), server.port());
    std::vector<const dlock::detail::Script*> scripts = {
        &dlock::detail::acquireScript(), &dlock::detail::acquireRecordingOwnerScript(),
        &dlock::detail::releaseScript(), &dlock::detail::shardedReleaseScript(),
        &dlock::detail::extendScript(),  &dlock::detail::extendManyScript(),
        &dlock::detail::inspectScript(), &dlock::detail::raiseFenceScript(),
        &dlock::detail::readWriteUpgradeScript(), &dlock::detail::readWriteExtendScript(),
        &dlock::detail::readWriteInspectScript(), &dlock::detail::semaphoreInspectScript(),
        &dlock::detail::conditionRenewScript(), &dlock::detail::conditionLeaveScript(),
        &dlock::detail::conditionInspectScript()};
    for (const bool sharded : {false, true}) {
      for (const auto* script :
           {&dlock::detail::fairAcquireScript(sharded), &dlock::detail::fairReleaseScript(sharded),
            &dlock::detail::fairLeaveScript(sharded), &dlock::detail::readWriteAcquireScript(sharded),
            &dlock::detail::readWriteReleaseScript(sharded), &dlock::detail::readWriteDowngradeScript(sharded),
            &dlock::detail::readWriteLeaveScript(sharded), &dlock::detail::semaphoreAcquireScript(sharded),
            &dlock::detail::semaphoreReleaseScript(sharded), &dlock::detail::semaphoreExtendScript(sharded),
            &dlock::detail::semaphoreLeaveScript(sharded), &dlock::detail::semaphoreResizeScript(sharded),
            &dlock::detail::conditionAwaitScript(false, sharded), &dlock::detail::conditionAwaitScript(true, sharded),
            &dlock::detail::conditionSignalScript(sharded)}) {
        scripts.push_back(script);
      }
    }
    for (const dlock::detail::Script* script : scripts) {
      INFO(script->name);
      CHECK(client.ok({"SCRIPT", "LOAD", script->source}).str == script->sha);
    }
  }
}
