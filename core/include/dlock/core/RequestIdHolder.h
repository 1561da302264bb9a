// SPDX-License-Identifier: Apache-2.0
// RequestIdHolder.h — the thread-local record of which keys this thread holds, per lock.
//
// Each (lock, key) the calling thread holds maps to its lease (owner token, fencing token) and a
// reentrancy count, so unlock(key) needs no token and one thread may hold many keys of many
// locks at once. Entries are the calling thread's only: another thread's unlock(key) finds
// nothing and gets NotOwnerError. A thread that exits while holding keys stops their renewal
// and logs a warning; their leases then end at their TTL. After fork(), the child's copy of the
// forking thread's holds is forgotten: they stay the parent's.
// Thread safety: each thread sees only its own holder; no locking needed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace dlock {
namespace detail {
class LeaseState;
}

class RequestIdHolder {
 public:
  struct Hold {
    std::shared_ptr<detail::LeaseState> lease;
    unsigned count = 0;
  };

  RequestIdHolder() = delete;

  // This thread's hold of `key` under lock `lockId`, or nullptr.
  [[nodiscard]] static Hold* find(std::uint64_t lockId, std::string_view key);
  // Records a first hold (count 1); the key must not be held yet.
  static Hold& insert(std::uint64_t lockId, std::string_view key, std::shared_ptr<detail::LeaseState> lease);
  static void erase(std::uint64_t lockId, std::string_view key);
  // How many keys this thread holds under `lockId`.
  [[nodiscard]] static std::size_t size(std::uint64_t lockId);
};

}  // namespace dlock
