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

std::shared_ptr<dlock::ILock> warmLock(const std::string& uri, bool fair) {
  auto lock = dlock::LockBuilder().backend(dlock::connect(uri)).leaseTime(5s).fair(fair).build();
  REQUIRE(lock->tryLock("budget"));
  lock->unlock("budget");
  return lock;
}

// tryLock(`key`, 200ms) while `pause`d, then `resume`d.
template <class Pause, class Resume>
void checkWithin(dlock::ILock& lock, Pause&& pause, Resume&& resume) {
  pause();
  const auto [took, threw] = timed([&] { (void)lock.tryLock("budget", 200ms); });
  resume();
  MESSAGE("tryLock(budget, 200ms) with the master paused took " << took.count() << " ms");
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
      checkWithin(*lock, [&] { set.pauseData(master); }, [&] { set.resumeData(master); });
    }
  }

  TEST_CASE("Cluster: tryLock(k, 200ms) with the key's master paused returns within its budget, default and fair") {
    ClusterServers cluster;
    const std::size_t owner = cluster.slotOwners()[dlock::clusterKeyNames("dlock:", "budget").slot];
    for (const bool fair : {false, true}) {
      CAPTURE(fair);
      auto lock = warmLock(cluster.uri() + "?command_timeout=2s&connect_timeout=2s", fair);
      checkWithin(*lock, [&] { cluster.node(owner).pause(); }, [&] { cluster.node(owner).resume(); });
    }
  }
}
