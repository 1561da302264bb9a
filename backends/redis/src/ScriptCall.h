// SPDX-License-Identifier: Apache-2.0
// ScriptCall.h — one script call, and one subscription, through RedisOperator's retries, for
// callers outside RedisOperator.cpp (the fair lock's, RedisFairOperator.cpp).
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "Connection.h"
#include "RedisNode.h"
#include "Subscriber.h"
#include "Scripts.h"
#include "Topology.h"

namespace dlock::detail {

// Reads a reply (error replies the topology does not retry included) from the node labelled so.
using ScriptReader = std::function<void(const redisReply& reply, const std::string& node)>;

// Runs `script` on the node serving `slot`, retried where and as long as the topology says.
void runScriptCall(Topology& topology, Call& call, std::uint16_t slot, const Script& script, const Argv& keys,
                   const Argv& args, const ScriptReader& read);

// As ScriptReader, on the connection the script ran on, still borrowed: what it sends there (a
// WAIT, ReplicaWait.h; an undo) follows the script on that connection. What it throws is not retried.
using ConnectionReader = std::function<void(Connection& connection, const redisReply& reply, const std::string& node)>;

// runScriptCall with a ConnectionReader.
void runScriptCallOn(Topology& topology, Call& call, std::uint16_t slot, const Script& script, const Argv& keys,
                     const Argv& args, const ConnectionReader& read);

// Subscribes on the node serving `slot` (`take` gets its subscriber and subscribes there), with the
// retries of a release watch's subscription; returns that node. What `take` throws decides as a
// refused or failed subscription does.
RedisNode* subscribeOn(Topology& topology, std::chrono::milliseconds budget, std::uint16_t slot,
                       const std::string& channel, const std::function<void(const std::shared_ptr<Subscriber>&)>& take);

// A subscription to `channel` on the node serving `slot` that follows the slot as the release
// watch does: true on a message, and after a move or a reconnect, where one may have been missed
// (an election's change channel, RedisElectionOperator.cpp).
std::unique_ptr<IReleaseWatch> watchChannel(std::shared_ptr<Topology> topology, std::chrono::milliseconds budget,
                                            std::uint16_t slot, std::string channel);

}  // namespace dlock::detail
