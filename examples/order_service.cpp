// SPDX-License-Identifier: Apache-2.0
// order_service — eight service instances (threads) sell 100 units of one item through
// OrderService, each injected with the lock a dlock::Client hands out by name; no unit is sold
// twice. Uses the in-memory backend, so it runs anywhere (dlock::Client("redis://...") in production).
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "OrderService.h"
#include "dlock/dlock.h"

int main() {
  dlock::Client client(std::make_shared<dlock::MemoryOperator>());
  auto inventory = std::make_shared<examples::Inventory>();
  inventory->add("widget", 100);

  std::atomic<int> placed{0};
  std::atomic<int> outOfStock{0};
  std::vector<std::thread> instances;
  for (int i = 0; i < 8; ++i) {
    instances.emplace_back([&] {
      examples::OrderService service(client.getLock("orders"), inventory);  // the same lock for every instance
      for (int order = 0; order < 20; ++order) {
        switch (service.placeOrder("widget")) {
          case examples::OrderResult::Placed: ++placed; break;
          case examples::OrderResult::OutOfStock: ++outOfStock; break;
          case examples::OrderResult::Busy: break;
        }
      }
    });
  }
  for (auto& instance : instances) instance.join();

  const bool ok = placed == 100 && inventory->unitsOf("widget") == 0 && outOfStock == 60;
  std::printf("orders placed: %d, out of stock: %d, units left: %d -> %s\n", placed.load(), outOfStock.load(),
              inventory->unitsOf("widget"), ok ? "OK" : "WRONG");
  client.close();
  return ok ? 0 : 1;
}
