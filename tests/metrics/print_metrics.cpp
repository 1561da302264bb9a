// SPDX-License-Identifier: Apache-2.0
// Prints dlock::formatMetrics for two locks on the memory backend after a fixed story, for
// parse_metrics.py to read with a real Prometheus parser:
//   "orders":  two acquisitions, one reentry, one try by another thread that found the key held
//   the second lock, named with a double quote, a backslash and a line feed: nothing done
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <dlock/core/LockBuilder.h>
#include <dlock/core/Metrics.h>
#include <dlock/memory/MemoryOperator.h>

int main() {
  auto backend = std::make_shared<dlock::MemoryOperator>();
  auto orders = dlock::LockBuilder().backend(backend).leaseTime(std::chrono::seconds(30)).name("orders").build();
  auto odd = dlock::LockBuilder().backend(backend).name("pay \"eu\"\\west\nline").build();

  if (!orders->tryLock("a") || !orders->tryLock("a")) return 1;
  bool taken = true;
  std::thread other([&] { taken = orders->tryLock("a"); });
  other.join();
  if (taken) return 1;
  orders->unlock("a");
  orders->unlock("a");
  if (!orders->tryLock("b")) return 1;
  orders->unlock("b");

  std::fputs(dlock::formatMetrics({orders, odd}).c_str(), stdout);
  return 0;
}
