// SPDX-License-Identifier: Apache-2.0
// ScriptCall.h — one script call through RedisOperator's retry loop, for callers outside
// RedisOperator.cpp (the fair lock's calls, RedisFairOperator.cpp).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <functional>
#include <string>

#include "Connection.h"
#include "Scripts.h"
#include "Topology.h"

namespace dlock::detail {

// Reads a reply (error replies the topology does not retry included) from the node labelled so.
using ScriptReader = std::function<void(const redisReply& reply, const std::string& node)>;

// Runs `script` on the node serving `slot`, retried where and as long as the topology says.
void runScriptCall(Topology& topology, Call& call, std::uint16_t slot, const Script& script, const Argv& keys,
                   const Argv& args, const ScriptReader& read);

}  // namespace dlock::detail
