// SPDX-License-Identifier: Apache-2.0
// The semaphore across processes on a real redis-server (dlock_test_worker's permit-tally and
// permit-hold): capacity is never exceeded, also with clients whose wall clock runs 10 s ahead
// (ClockShift.c preloaded); permits of holders killed with SIGKILL come back within one lease; a
// release of three admits three waiters in the release itself.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ChildProcess.h"
#include "RedisClient.h"
#include "RedisProcess.h"
#include "TestHelpers.h"
#include "dlock/connect.h"
#include "dlock/core/SemaphoreBuilder.h"

using namespace std::chrono_literals;
using dlock::test::ChildProcess;
using dlock::test::RedisProcess;
using dlock::test::eventually;
using Steady = std::chrono::steady_clock;

namespace {

std::string testName(const std::string& name) { return "dlock-test:{" + std::to_string(::getpid()) + ":" + name + "}"; }

// The test's own view of the semaphore the workers share.
std::shared_ptr<dlock::Semaphore> observe(const RedisProcess& server, const std::string& name, std::uint32_t capacity) {
  return dlock::SemaphoreBuilder().backend(dlock::connect(server.uri())).name(name).permits(capacity).build();
}

// A permit-hold worker: `count` of the 4 permits of `name` under the watchdog with `lease`.
std::unique_ptr<ChildProcess> holder(const RedisProcess& server, const std::string& name, int count,
                                     std::chrono::milliseconds lease) {
  return std::make_unique<ChildProcess>(std::vector<std::string>{DLOCK_TEST_WORKER, "permit-hold", server.uri(), name,
                                                                 "4", std::to_string(count),
                                                                 std::to_string(lease.count())});
}

bool acquired(ChildProcess& process) {
  const auto line = process.readLine();
  return line && line->rfind("acquired ", 0) == 0;
}

}  // namespace

TEST_SUITE("SemaphoreProcesses") {
  TEST_CASE("16 processes on capacity 4, two with their clock 10 s ahead: a tally kept inside each hold never exceeds 4") {
    RedisProcess server;
    const std::string name = testName("tally");
    const std::string tally = testName("tally-count");
    const std::string shift = "/tmp/dlock-semaphore-shift-" + std::to_string(::getpid());
    std::ofstream(shift) << "10\n";
    std::vector<std::string> outs;
    std::vector<std::unique_ptr<ChildProcess>> workers;
    for (int i = 0; i < 16; ++i) {
      outs.push_back("/tmp/dlock-semaphore-tally-" + std::to_string(::getpid()) + "-" + std::to_string(i));
      std::remove(outs.back().c_str());
      ChildProcess::Options options;
      options.argv = {DLOCK_TEST_WORKER, "permit-tally", server.uri(), name, "4", "30", tally, outs.back()};
      if (i < 2) {  // wall clock 10 s ahead; leases stay on the server's clock
        options.env = {{"LD_PRELOAD", DLOCK_TEST_CLOCK_SHIFT},
                       {"DLOCK_CLOCK_SHIFT_FILE", shift},
                       {"ASAN_OPTIONS", "verify_asan_link_order=0"}};
      }
      workers.push_back(std::make_unique<ChildProcess>(options));
    }
    for (auto& worker : workers) CHECK(worker->wait() == 0);
    long long most = 0;
    int holds = 0;
    int lost = 0;
    for (const auto& out : outs) {
      std::ifstream in(out);
      for (std::string line; std::getline(in, line);) {
        if (line == "lost") {
          ++lost;
          continue;
        }
        ++holds;
        most = std::max(most, std::stoll(line));
      }
      std::remove(out.c_str());
    }
    std::remove(shift.c_str());
    CHECK(holds == 16 * 30);
    CHECK(lost == 0);  // nobody's permits were taken from it while held
    CHECK(most <= 4);
    CHECK(most == 4);  // the check can fail: the holds did overlap
    CHECK(observe(server, name, 4)->availablePermits() == 4);
  }

  TEST_CASE("kill -9 of holders: their permits go to the waiters, and back to the semaphore, within one lease") {
    RedisProcess server;
    const std::string name = testName("killed");
    constexpr auto kLease = 2s;
    auto semaphore = observe(server, name, 4);
    std::vector<std::unique_ptr<ChildProcess>> holders;
    for (int i = 0; i < 4; ++i) {
      holders.push_back(holder(server, name, 1, kLease));
      REQUIRE(acquired(*holders.back()));
    }
    std::vector<std::unique_ptr<ChildProcess>> waiters;
    for (int i = 0; i < 2; ++i) waiters.push_back(holder(server, name, 1, kLease));
    REQUIRE(eventually([&] { return semaphore->inspect().waiters.size() == 2; }));

    auto killed = Steady::now();
    for (int i = 0; i < 2; ++i) {
      holders[static_cast<std::size_t>(i)]->signal(SIGKILL);
      holders[static_cast<std::size_t>(i)]->wait();
    }
    for (auto& waiter : waiters) REQUIRE(acquired(*waiter));
    // The last renewal came before the kill, so the lease ended at most kLease after it; a
    // second on top for the waiters' try, their claim's extend and a busy machine.
    CHECK(Steady::now() - killed <= kLease + 1s);

    killed = Steady::now();
    for (std::size_t i = 2; i < 4; ++i) holders[i]->signal(SIGKILL);
    for (auto& waiter : waiters) waiter->signal(SIGKILL);
    REQUIRE(eventually([&] { return semaphore->availablePermits() == 4; }, kLease * 2 + dlock::test::kEventBudget));
    CHECK(Steady::now() - killed <= kLease + 1s);
  }

  TEST_CASE("a release of 3 admits the 3 head waiters in the release itself") {
    RedisProcess server;
    const std::string name = testName("release-three");
    auto semaphore = observe(server, name, 4);
    auto three = holder(server, name, 3, 30s);
    REQUIRE(acquired(*three));
    auto one = holder(server, name, 1, 30s);
    REQUIRE(acquired(*one));
    std::vector<std::unique_ptr<ChildProcess>> waiters;
    for (int i = 0; i < 3; ++i) waiters.push_back(holder(server, name, 1, 30s));
    REQUIRE(eventually([&] { return semaphore->inspect().waiters.size() == 3; }));

    three->writeLine("release");
    REQUIRE(three->readLine() == std::optional<std::string>("released"));
    const dlock::SemaphoreInfo after = semaphore->inspect();  // whatever the waiters did since
    CHECK(after.waiters.empty());
    CHECK(after.inUse == 4);
    CHECK(after.holders.size() == 4);
    for (auto& waiter : waiters) CHECK(acquired(*waiter));
  }
}
