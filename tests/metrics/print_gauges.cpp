// SPDX-License-Identifier: Apache-2.0
// Prints dlock::formatMetrics of a Client at a known state, for parse_gauges.py to read with a
// real Prometheus parser, then lets every wait through:
//   lock "orders"            2 holds (a thread hold, a Lease), 1 thread waiting for the held key
//   read-write "config"      2 readers of one key, 1 writer waiting
//   semaphore "partner-api"  capacity 3, 2 permits in use, 1 thread waiting for 2 more
// Exits 1, saying which, when a wait never shows in the gauges (10 s) or a step fails.
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include <dlock/Client.h>
#include <dlock/core/Metrics.h>
#include <dlock/memory/MemoryOperator.h>

using namespace std::chrono_literals;

namespace {

bool waitersShown(const dlock::Client& client) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::vector<dlock::LockStats> stats = client.stats();
    if (stats.size() == 3 && stats[0].waiting == 1 && stats[1].waiting == 1 && stats[2].waiting == 1) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

}  // namespace

int main() {
  dlock::Client client(std::make_shared<dlock::MemoryOperator>());
  const auto orders = client.getLock("orders");
  const auto config = client.getReadWriteLock("config");
  const auto partner = client.getSemaphore("partner-api", 3);

  dlock::AcquireOptions once;
  once.waitTime = 0ms;
  if (!orders->tryLock("a")) return 1;
  dlock::Lease b = orders->acquire("b", once);
  if (!config->readLock()->tryLock("cfg")) return 1;
  dlock::Lease secondReader = config->readLock()->acquire("cfg", once);
  dlock::PermitLease permits = partner->tryAcquire(2);
  if (!b || !secondReader || !permits) return 1;

  std::vector<std::thread> waiters;
  waiters.emplace_back([&] {
    if (orders->tryLock("a", 30s)) orders->unlock("a");
  });
  waiters.emplace_back([&] {
    if (config->writeLock()->tryLock("cfg", 30s)) config->writeLock()->unlock("cfg");
  });
  waiters.emplace_back([&] { (void)partner->tryAcquire(2, 30s); });
  const bool shown = waitersShown(client);
  if (shown) std::fputs(dlock::formatMetrics(client).c_str(), stdout);

  orders->unlock("a");
  config->readLock()->unlock("cfg");
  secondReader.release();
  permits.release();
  for (auto& waiter : waiters) waiter.join();
  if (!shown) std::fputs("FAILED: the three waiting threads never showed in the gauges\n", stderr);
  return shown ? 0 : 1;
}
