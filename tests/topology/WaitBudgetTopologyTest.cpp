// SPDX-License-Identifier: Apache-2.0
// A timed wait keeps its budget on Sentinel and Cluster too: with the key's master paused, a
// tryLock(k, 200ms) returns within the budget plus TimedWait.h's allowance, default and fair,
// however long the URI's command timeout.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <string>

#include "ClusterServers.h"
#include "SentinelServers.h"
#include "TimedWait.h"
#include "dlock/cluster/ClusterKeys.h"
#include "dlock/connect.h"
#include "dlock/core/LockBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ClusterServers;
using dlock::test::SentinelServers;
using dlock::test::timed;

namespace {

// The key of each case: its own, as the cancelled acquire of the one before may still hold its key
// until the cancel, queued behind it on the resumed server, runs.
std::string keyOf(bool fair) { return fair ? "budget-fair" : "budget"; }

std::shared_ptr<dlock::ILock> warmLock(const std::string& uri, bool fair) {
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(5s).fair(fair).build();
  REQUIRE(lock->tryLock(keyOf(fair)));
  lock->unlock(keyOf(fair));
  return lock;
}

// tryLock(key, 200ms) while `pause`d, then `resume`d.
template <class Pause, class Resume>
void checkWithin(dlock::ILock& lock, bool fair, Pause&& pause, Resume&& resume) {
  pause();
  const auto [took, threw] = timed([&] { (void)lock.tryLock(keyOf(fair), 200ms); });
  resume();
  MESSAGE("tryLock(" << keyOf(fair) << ", 200ms) with the master paused took " << took.count() << " ms");
  CHECK(threw);
  CHECK(took >= 200ms);
  CHECK(took <= 200ms + dlock::test::kWaitAllowance);
}

}  // namespace

TEST_SUITE("WaitBudgetTopology") {
  TEST_CASE("Sentinel: tryLock(k, 200ms) with the master paused returns within its budget, default and fair") {
    SentinelServers set;
    const std::size_t master = set.nodeOfPort(set.masterPort());
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      auto lock = warmLock(set.uri("command_timeout=2s&connect_timeout=2s"), fair);
      checkWithin(*lock, fair, [&] { set.pauseData(master); }, [&] { set.resumeData(master); });
    }
  }

  TEST_CASE("Cluster: tryLock(k, 200ms) with the key's master paused returns within its budget, default and fair") {
    ClusterServers cluster;
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      const std::size_t owner = cluster.slotOwners()[dlock::clusterKeyNames("dlock:", keyOf(fair)).slot];
      auto lock = warmLock(cluster.uri() + "?command_timeout=2s&connect_timeout=2s", fair);
      checkWithin(*lock, fair, [&] { cluster.node(owner).pause(); }, [&] { cluster.node(owner).resume(); });
    }
  }
}
