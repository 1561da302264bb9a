// SPDX-License-Identifier: Apache-2.0
// RenewalCalls.h — the script calls of a watchdog round of every kind (RedisOperator::renewBatch,
// RedisRenewalBatch.cpp): each kind's file makes the calls of its own script (extendMany, rwExtend,
// semExtendMany, condRenew) for renewals of one slot and one lease, in that kind's chunks, and the
// batch pipelines every call of one node together. Each call's reply is one 1 or 0 per member.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "Connection.h"
#include "RedisOperatorOptions.h"
#include "Scripts.h"
#include "dlock/IRenewalBatch.h"

namespace dlock::detail {

// One script call of the round, owning the texts its KEYS and ARGV view.
struct RenewalCall {
  const Script* script = nullptr;
  Argv keys;
  Argv args;
  std::vector<std::size_t> members;  // the renewals it settles, in the order of its reply

  // Keeps `text` for the call's lifetime and returns a view of it: each text has a place of its
  // own, which neither a move of the call nor a copy of it by a growing vector changes.
  std::string_view keep(std::string text) {
    return *texts_.emplace_back(std::make_shared<const std::string>(std::move(text)));
  }

 private:
  std::vector<std::shared_ptr<const std::string>> texts_;
};

// The calls renewing `members` (indexes into `renewals`, all of one kind, one slot and one ttl).
using RenewalCalls = std::vector<RenewalCall>;
RenewalCalls exclusiveRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                                   const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members);
RenewalCalls readWriteRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                                   const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members);
RenewalCalls permitRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                                const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members);
RenewalCalls awaitRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                               const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members);

}  // namespace dlock::detail
