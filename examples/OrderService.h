// SPDX-License-Identifier: Apache-2.0
// OrderService.h — the dependency-injection story: a service that must not sell the last unit
// of an item twice when many instances run at once. It depends only on dlock::ILock; production
// wires a Redis backend, tests wire the memory one (tests/unit/OrderServiceTest.cpp).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "dlock/ILock.h"
#include "dlock/ScopedLock.h"

namespace examples {

// The stock the instances share. Real services keep it in a database; here a map, whose own
// mutex only protects the container — the check-then-act race is what the lock prevents.
class Inventory {
 public:
  void add(const std::string& item, int units) {
    std::lock_guard<std::mutex> guard(mutex_);
    stock_[item] += units;
  }
  int unitsOf(const std::string& item) const {
    std::lock_guard<std::mutex> guard(mutex_);
    const auto it = stock_.find(item);
    return it == stock_.end() ? 0 : it->second;
  }
  void set(const std::string& item, int units) {
    std::lock_guard<std::mutex> guard(mutex_);
    stock_[item] = units;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> stock_;
};

enum class OrderResult { Placed, OutOfStock, Busy };

class OrderService {
 public:
  OrderService(std::shared_ptr<dlock::ILock> lock, std::shared_ptr<Inventory> inventory)
      : lock_(std::move(lock)), inventory_(std::move(inventory)) {}

  // Takes one unit of `item`, waiting up to 2 s for other instances working on the same item.
  // The guard releases the key when the scope ends, also when the inventory throws.
  OrderResult placeOrder(const std::string& item) {
    dlock::ScopedLock guard(*lock_, "order:" + item, std::chrono::seconds(2));
    if (!guard) return OrderResult::Busy;
    // Read, decide, write: safe only because no other instance runs this for the same item now.
    const int units = inventory_->unitsOf(item);
    if (units <= 0) return OrderResult::OutOfStock;
    inventory_->set(item, units - 1);
    return OrderResult::Placed;
  }

 private:
  std::shared_ptr<dlock::ILock> lock_;
  std::shared_ptr<Inventory> inventory_;
};

}  // namespace examples
