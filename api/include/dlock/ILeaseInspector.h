// SPDX-License-Identifier: Apache-2.0
// ILeaseInspector.h — diagnostics: what a backend knows about a key (`dlock status KEY`), kept
// out of the lock's seam. Every backend of this library offers it.
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace dlock {

struct LeaseInfo {
  bool held = false;
  std::chrono::milliseconds remaining{0};  // when held
  std::uint64_t fencingToken = 0;          // the last token handed out for the key; 0 if never locked
  // When held and the holder recorded one (LockBuilder::ownerLabel, IOwnerRecorder): its owner
  // label, any bytes (escape them before printing), and when the backend granted that lease by its
  // own clock (a Redis server's TIME). Empty and the epoch otherwise.
  std::string owner;
  std::chrono::system_clock::time_point ownerSince{};
};

class ILeaseInspector {
 public:
  ILeaseInspector() = default;
  ILeaseInspector(const ILeaseInspector&) = delete;
  ILeaseInspector& operator=(const ILeaseInspector&) = delete;
  virtual ~ILeaseInspector() = default;

  // Reads the state of `key` without changing it.
  virtual LeaseInfo inspect(std::string_view key) = 0;
};

}  // namespace dlock
