// SPDX-License-Identifier: Apache-2.0
// PausedHeir.h — the fair lock's paused-heir scenario, on any topology that has a fair queue:
// P holds KEY; W waits (waiter lease 1.5 s) and C waits behind it, each a worker process; W is
// paused (SIGSTOP) and P releases, handing KEY to W for a claim no longer than W's place; the
// claim runs out, C takes KEY; W resumes. W must not return from lock() while C holds KEY: it is
// told the key is not its and queues anew, and gets KEY only once C releases it.
#pragma once

#include <doctest/doctest.h>

#include <csignal>
#include <chrono>
#include <optional>
#include <string>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "TestHelpers.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/connect.h"

namespace dlock::test {

// `worker`: the dlock_test_worker program; `client`: a connection to the node serving `key`.
inline void checkPausedHeirWaitsItsTurn(const std::string& worker, const std::string& uri, const std::string& key,
                                        RedisClient& client) {
  using namespace std::chrono_literals;
  const std::string queue = "dlock:{" + key + "}:fair:queue";
  const auto queued = [&] { return client.ok({"LLEN", queue}).integer; };
  auto holder = LockBuilder().backend(connect(uri)).leaseTime(10s).fair().build();
  holder->lock(key);  // P
  ChildProcess w({worker, "hold", uri, key, "fair", "1500"});
  REQUIRE(eventually([&] { return queued() == 1; }));
  ChildProcess c({worker, "hold", uri, key, "fair", "5000"});
  REQUIRE(eventually([&] { return queued() == 2; }));
  w.signal(SIGSTOP);
  REQUIRE(eventually([&] { return processState(w.pid()) == 'T'; }));
  holder->unlock(key);  // handed to the paused W, for a claim of at most the 1.5 s its place had left
  // W's claim runs out unrenewed; C's next attempt takes the key.
  const auto cAcquired = c.readLine();
  REQUIRE(cAcquired.has_value());
  REQUIRE(cAcquired->rfind("acquired", 0) == 0);
  w.signal(SIGCONT);
  // W reads the stale hand-off, is told the key is not its, and queues behind C; it must not
  // return from lock() then, nor after: watch it until it has renewed its new place once (a
  // third of its waiter lease later), by when any message it held has been read.
  std::optional<std::string> early;
  const auto placeExpiry = [&] {
    const auto places = client.ok({"ZRANGE", "dlock:{" + key + "}:fair:leases", "0", "-1", "WITHSCORES"});
    return places.elements.size() == 2 ? places.elements[1].str : std::string();
  };
  CHECK(eventually([&] {
    if (!early) early = w.readLine(0ms);
    return early || queued() == 1;
  }));
  const std::string firstExpiry = placeExpiry();
  CHECK(eventually([&] {
    if (!early) early = w.readLine(0ms);
    return early || placeExpiry() != firstExpiry;
  }));
  CHECK_FALSE(early.has_value());
  c.writeLine("held?");
  CHECK(c.readLine() == std::optional<std::string>("held yes"));
  c.writeLine("unlock");
  CHECK(c.readLine() == std::optional<std::string>("unlocked"));
  const auto wAcquired = early ? early : w.readLine();
  REQUIRE(wAcquired.has_value());
  CHECK(wAcquired->rfind("acquired", 0) == 0);
  w.writeLine("unlock");
  CHECK(w.readLine() == std::optional<std::string>("unlocked"));  // W's section was protected to the end
}

}  // namespace dlock::test
