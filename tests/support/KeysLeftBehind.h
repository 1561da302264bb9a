// SPDX-License-Identifier: Apache-2.0
// KeysLeftBehind.h — the check that dlock leaves no key without a TTL, on any topology: many
// distinct keys locked and released (issue 23: fence counters once piled up for ever, one per
// key), half of them with an owner label, then every dlock key on every server given (each master
// of a cluster, each member of a redlock) must carry a TTL, and no owner record may remain.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "RedisClient.h"
#include "TestHelpers.h"
#include "dlock/IOperator.h"
#include "dlock/IOwnerRecorder.h"
#include "dlock/core/LockBuilder.h"

namespace dlock::test {

// Also checks, first, that a held labelled key shows its owner through inspect(), and that a
// renewal renews its label.
inline void checkNoKeyLeftWithoutTtl(const std::shared_ptr<IOperator>& backend, std::vector<RedisClient>& servers,
                                     int keys = 10000) {
  auto plain = LockBuilder().backend(backend).build();
  auto labelled = LockBuilder().backend(backend).ownerLabel("ttl-check").build();
  REQUIRE(labelled->tryLock("order:labelled"));
  const std::string owner = backend->inspect("order:labelled").owner;
  CHECK(owner.rfind("host=", 0) == 0);
  CHECK(owner.size() > std::string(" ttl-check").size());
  CHECK(owner.compare(owner.size() - 10, 10, " ttl-check") == 0);
  labelled->unlock("order:labelled");

  // Renewals carry the label with the lease (on a cluster, the batch's script names it beside
  // the key, in the key's slot).
  auto* recorder = dynamic_cast<IOwnerRecorder*>(backend.get());
  REQUIRE(recorder != nullptr);
  REQUIRE(recorder->lockRecordingOwner("order:renewed", "renewed-token", std::chrono::seconds(5), "r").acquired);
  REQUIRE(backend->extendAll({{"order:renewed", "renewed-token"}}, std::chrono::minutes(1)).front().extended);
  long long longest = -2;  // the owner record's PTTL where it lives (every node of a redlock)
  for (auto& server : servers) {
    const Reply pttl = server.command({"PTTL", "dlock:{order:renewed}:owner"});  // MOVED from other masters
    if (!pttl.isError()) longest = std::max(longest, pttl.integer);
  }
  CHECK(longest > 5000);
  REQUIRE(backend->unlock("order:renewed", "renewed-token").released);

  for (int i = 0; i < keys; ++i) {
    const std::string key = "order:" + std::to_string(i);
    ILock& lock = i % 2 == 0 ? *plain : *labelled;
    REQUIRE(lock.tryLock(key));
    lock.unlock(key);
  }
  long long stored = 0;
  for (auto& server : servers) {
    stored += server.ok({"DBSIZE"}).integer;
    checkEveryLockKeyHasTtl(server);
    CHECK(server.ok({"KEYS", "dlock:*:owner"}).elements.empty());
  }
  CHECK(stored >= keys);  // the fence counters (and release records) are there, with TTLs
}

}  // namespace dlock::test
