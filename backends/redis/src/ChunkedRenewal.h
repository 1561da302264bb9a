// SPDX-License-Identifier: Apache-2.0
// ChunkedRenewal.h — the watchdog's batch renewal of the queued primitives (read-write holds,
// semaphore permits): the holds grouped by slot (a script's keys share one on a cluster; one group
// on one server), one script call per group and per chunk, each through the retries of any call,
// then WAIT on the same connection with wait_replicas (ReplicaWait.h). Outcomes are per hold: a
// chunk that cannot be settled, or whose replicas do not acknowledge it, makes only its own holds
// unknown.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "RedisOperatorOptions.h"
#include "RetryPolicy.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/IOperator.h"

namespace dlock::detail {

// Holds (indexes into the caller's batch) by the slot their script runs in.
using HoldsBySlot = std::map<std::uint16_t, std::vector<std::size_t>>;

// Runs one chunk's script for `holds` (in order) with `call` on `slot` through runScriptCallOn,
// handing its reply to `read`; the reply is one 1 or 0 per hold.
using RunChunk = std::function<void(Call& call, std::uint16_t slot, const std::vector<std::size_t>& holds,
                                    const ConnectionReader& read)>;

// One result per hold of the batch (`total` of them), as IOperator::extendAll; `what` names the
// holds in messages ("permit leases").
std::vector<ExtendResult> renewInChunks(Topology& topology, const RedisOperatorOptions& options,
                                        const HoldsBySlot& bySlot, std::size_t total, std::size_t chunkSize,
                                        const char* what, const RunChunk& run);

}  // namespace dlock::detail
