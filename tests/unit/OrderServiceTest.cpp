// SPDX-License-Identifier: Apache-2.0
// The dependency-injection story: OrderService takes a std::shared_ptr<dlock::ILock>; the test
// wires the in-memory backend and the service code does not change.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "examples/OrderService.h"
#include "dlock/core/LockBuilder.h"
#include "dlock/memory/MemoryOperator.h"

using namespace std::chrono_literals;

TEST_SUITE("OrderService") {
  TEST_CASE("instances racing for the last units never sell one twice") {
    auto lock = dlock::LockBuilder().backend(std::make_shared<dlock::MemoryOperator>()).leaseTime(10s).build();
    auto inventory = std::make_shared<examples::Inventory>();
    inventory->add("widget", 50);
    std::atomic<int> placed{0};
    std::atomic<int> outOfStock{0};
    std::vector<std::thread> instances;
    for (int i = 0; i < 6; ++i) {
      instances.emplace_back([&] {
        examples::OrderService service(lock, inventory);
        for (int order = 0; order < 20; ++order) {
          const auto result = service.placeOrder("widget");
          if (result == examples::OrderResult::Placed) ++placed;
          if (result == examples::OrderResult::OutOfStock) ++outOfStock;
        }
      });
    }
    for (auto& instance : instances) instance.join();
    CHECK(placed == 50);
    CHECK(outOfStock == 70);
    CHECK(inventory->unitsOf("widget") == 0);
  }

  TEST_CASE("a busy item is reported, not oversold") {
    auto backend = std::make_shared<dlock::MemoryOperator>();
    auto lock = dlock::LockBuilder().backend(backend).leaseTime(10s).build();
    auto inventory = std::make_shared<examples::Inventory>();
    inventory->add("widget", 1);
    REQUIRE(backend->lock("order:widget", "another-instance", 60000ms).acquired);
    examples::OrderService service(lock, inventory);
    std::atomic<bool> busy{false};
    std::thread caller([&] { busy = service.placeOrder("widget") == examples::OrderResult::Busy; });
    caller.join();
    CHECK(busy);
    CHECK(inventory->unitsOf("widget") == 1);
  }
}
