// SPDX-License-Identifier: Apache-2.0
// IRenewalBatch.h — renewing holds of every kind in one call (Renewal, IRenewalBatch,
// renewEachKind): a watchdog that keeps a lock's, a read-write lock's and a semaphore's leases
// (one dlock::Client's) renews those due at one tick together, one round trip per node on Redis.
// Each hold is still renewed by its own kind's script for its own lease.
// Thread safety: implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dlock/IConditionOperator.h"
#include "dlock/IOperator.h"
#include "dlock/IReadWriteOperator.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"

namespace dlock {

// What a hold is, for its renewal: IOperator::extend (Exclusive: the exclusive and fair locks),
// IReadWriteOperator::extendReadWrite (Read, Write), ISemaphoreOperator::extendPermits (Permits),
// IConditionOperator::renewAwait (Awaiting: a Condition waiter's place).
enum class RenewalKind : std::uint8_t { Exclusive, Read, Write, Permits, Awaiting };

// One hold in a batch. `key`: the lock's key, the read-write lock's or the semaphore's name.
struct Renewal {
  RenewalKind kind = RenewalKind::Exclusive;
  std::string_view key;
  std::string_view token;
  std::chrono::milliseconds ttl{0};  // renewed for this long (Awaiting: the waiter lease)
  std::string_view condition;        // Awaiting: the condition's name
  std::chrono::milliseconds heldTtl{0};  // Awaiting: the lease of the hold given up (ConditionWaiter::ttl)
};

class IRenewalBatch {
 public:
  IRenewalBatch() = default;
  IRenewalBatch(const IRenewalBatch&) = delete;
  IRenewalBatch& operator=(const IRenewalBatch&) = delete;
  virtual ~IRenewalBatch() = default;

  // One result per renewal, in order, as IOperator::extendAll: `unknown` where the node serving it
  // could not be reached; a backend may throw when it could settle none.
  virtual std::vector<ExtendResult> renewBatch(const std::vector<Renewal>& renewals) = 0;
};

// renewBatch as one call of each kind's own batch (extendAll, extendReadWriteAll,
// extendPermitsAll, renewAwaitAll) per lease length: for a backend with no faster way, and for
// what a faster one could not settle. ConfigError for a kind `backend` does not keep. A group
// whose call throws a ConnectionError is unknown; when every group did, that error is thrown.
inline std::vector<ExtendResult> renewEachKind(IOperator& backend, const std::vector<Renewal>& renewals) {
  std::vector<ExtendResult> results(renewals.size());
  std::map<std::pair<RenewalKind, std::chrono::milliseconds::rep>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < renewals.size(); ++i) groups[{renewals[i].kind, renewals[i].ttl.count()}].push_back(i);
  const auto need = [&backend](auto* capability, const char* what) -> decltype(*capability)& {
    if (capability == nullptr) throw ConfigError("dlock: renewBatch: " + backend.describe() + " keeps no " + what);
    return *capability;
  };
  std::size_t cutOff = 0;
  std::string cause;
  for (const auto& [group, members] : groups) {
    const RenewalKind kind = group.first;
    const std::chrono::milliseconds ttl(group.second);
    std::vector<ExtendResult> got;
    try {
      if (kind == RenewalKind::Exclusive || kind == RenewalKind::Permits) {
        std::vector<LeaseRef> refs;
        for (const std::size_t i : members) refs.push_back(LeaseRef{renewals[i].key, renewals[i].token});
        got = kind == RenewalKind::Exclusive
                  ? backend.extendAll(refs, ttl)
                  : need(dynamic_cast<ISemaphoreOperator*>(&backend), "semaphores").extendPermitsAll(refs, ttl);
      } else if (kind == RenewalKind::Awaiting) {
        std::vector<ConditionWaiter> waiters;
        for (const std::size_t i : members) {
          waiters.push_back(ConditionWaiter{renewals[i].key, renewals[i].condition, renewals[i].token, renewals[i].heldTtl});
        }
        got = need(dynamic_cast<IConditionOperator*>(&backend), "conditions").renewAwaitAll(waiters, ttl);
      } else {
        std::vector<ReadWriteLease> holds;
        const ReadWriteMode mode = kind == RenewalKind::Write ? ReadWriteMode::Write : ReadWriteMode::Read;
        for (const std::size_t i : members) holds.push_back(ReadWriteLease{renewals[i].key, renewals[i].token, mode});
        got = need(dynamic_cast<IReadWriteOperator*>(&backend), "read-write locks").extendReadWriteAll(holds, ttl);
      }
    } catch (const ConnectionError& error) {
      cause = error.what();
      cutOff += members.size();
      got.assign(members.size(), ExtendResult{false, true, {}});
    }
    got.resize(members.size(), ExtendResult{false, true, {}});
    for (std::size_t j = 0; j < members.size(); ++j) results[members[j]] = got[j];
  }
  if (!renewals.empty() && cutOff == renewals.size()) throw ConnectionError(cause);
  return results;
}

}  // namespace dlock
