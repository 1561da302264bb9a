// SPDX-License-Identifier: Apache-2.0
#include "ChunkedRenewal.h"

#include <algorithm>
#include <string>

#include "QueueReplies.h"
#include "ReplicaWait.h"
#include "Replies.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

std::vector<ExtendResult> renewInChunks(Topology& topology, const RedisOperatorOptions& options,
                                        const HoldsBySlot& bySlot, std::size_t total, std::size_t chunkSize,
                                        const char* what, const RunChunk& run) {
  std::vector<ExtendResult> results(total);
  std::string unreachable;        // the last ConnectionError's text
  std::size_t cutOff = 0;         // the holds it and its like left unknown
  for (const auto& [slot, members] : bySlot) {
    for (std::size_t start = 0; start < members.size(); start += chunkSize) {
      const auto first = members.begin() + static_cast<std::ptrdiff_t>(start);
      const std::vector<std::size_t> holds(first, first + static_cast<std::ptrdiff_t>(std::min(chunkSize, members.size() - start)));
      const std::string about = "(" + std::to_string(holds.size()) + " " + what + ")";
      Call call("extend", about, options.retryBudget);
      try {
        run(call, slot, holds, [&](Connection& connection, const redisReply& reply, const std::string& node) {
          const std::string where = describeCall("extend", about, node);
          const std::vector<bool> flags = readFlagsReply(reply, holds.size(), where);
          const bool replicated = renewalsReplicated(options, connection, where);
          for (std::size_t j = 0; j < holds.size(); ++j) {
            results[holds[j]].extended = replicated && flags[j];
            results[holds[j]].unknown = !replicated;
          }
        });
      } catch (const ConnectionError& error) {
        unreachable = error.what();
        cutOff += holds.size();
        for (const std::size_t i : holds) results[i].unknown = true;
      } catch (const LockError& error) {
        logger()->warn("dlock: renewing {} {} on {}: {}", holds.size(), what, topology.describe(), error.what());
        for (const std::size_t i : holds) results[i].unknown = true;
      }
    }
  }
  // Nothing settled, for want of a connection: the caller learns why (the watchdog's warning
  // names it), as from a call that threw at once; each hold is unknown either way.
  if (total > 0 && cutOff == total) throw ConnectionError(unreachable);
  return results;
}

}  // namespace dlock::detail
