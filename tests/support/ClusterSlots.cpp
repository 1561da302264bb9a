// SPDX-License-Identifier: Apache-2.0
#include "ClusterSlots.h"

#include <algorithm>
#include <stdexcept>

namespace dlock::test {

SlotView slotView(RedisClient& client) {
  const Reply reply = client.ok({"CLUSTER", "SLOTS"});
  SlotView view;
  for (const auto& entry : reply.elements) {
    if (entry.elements.size() < 3 || entry.elements[2].elements.size() < 2) {
      throw std::runtime_error("cluster: unexpected CLUSTER SLOTS entry");
    }
    view.emplace_back(entry.elements[0].integer, entry.elements[1].integer, entry.elements[2].elements[1].integer);
  }
  std::sort(view.begin(), view.end());
  return view;
}

bool coversAllSlots(const SlotView& view) {
  constexpr long long kSlots = 16384;
  long long next = 0;
  for (const auto& [first, last, port] : view) {
    if (first != next) return false;
    next = last + 1;
  }
  return next == kSlots;
}

}  // namespace dlock::test
