// SPDX-License-Identifier: Apache-2.0
// IFenceRaiser.h — a backend whose fencing counters can be raised: what Redlock requires of each
// of its members, to carry the highest token of a quorum forward.
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace dlock {

class IFenceRaiser {
 public:
  IFenceRaiser() = default;
  IFenceRaiser(const IFenceRaiser&) = delete;
  IFenceRaiser& operator=(const IFenceRaiser&) = delete;
  virtual ~IFenceRaiser() = default;

  // Raises the key's fencing counter to at least `atLeast` (never lowers it); returns its value now.
  virtual std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) = 0;
};

}  // namespace dlock
