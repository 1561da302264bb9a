// SPDX-License-Identifier: Apache-2.0
// RedisOperator::renewBatch: a watchdog round of every kind, one pipeline per node (RenewalCalls.h
// makes each kind's calls). What the pipeline cannot settle (a node not reached, a redirection, a
// slot without an owner) goes through renewEachKind, whose calls follow the topology.
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "RedisNode.h"
#include "RedisOperatorOptions.h"
#include "RenewalCalls.h"
#include "ReplicaWait.h"
#include "Replies.h"
#include "Reply.h"
#include "Topology.h"
#include "KeyNames.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

using namespace detail;

namespace {

// The renewals of one node, by kind, slot and lease: the members of each kind's calls.
using NodeGroups = std::map<std::tuple<RenewalKind, std::uint16_t, std::chrono::milliseconds::rep>, std::vector<std::size_t>>;

RenewalCalls callsOf(RenewalKind kind, const RedisOperatorOptions& options, bool sharded,
                     const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members) {
  switch (kind) {
    case RenewalKind::Exclusive: return exclusiveRenewalCalls(options, sharded, renewals, members);
    case RenewalKind::Read:
    case RenewalKind::Write: return readWriteRenewalCalls(options, sharded, renewals, members);
    case RenewalKind::Permits: return permitRenewalCalls(options, sharded, renewals, members);
    case RenewalKind::Awaiting: return awaitRenewalCalls(options, sharded, renewals, members);
  }
  return {};
}

// Read and Write share one script: their calls group by slot and lease, not by mode.
RenewalKind scriptKindOf(RenewalKind kind) { return kind == RenewalKind::Write ? RenewalKind::Read : kind; }

// One pipeline on `node` for the renewals of `groups`: their results set, or their indexes added
// to `elsewhere` when the node could not be reached or redirected them.
void renewOnNode(RedisNode& node, const NodeGroups& groups, const std::vector<Renewal>& renewals, Topology& topology,
                 const RedisOperatorOptions& options, std::vector<ExtendResult>& results,
                 std::vector<std::size_t>& elsewhere) {
  RenewalCalls calls;
  for (const auto& [group, members] : groups) {
    RenewalCalls made = callsOf(std::get<0>(group), options, topology.sharded(), renewals, members);
    for (RenewalCall& call : made) calls.push_back(std::move(call));
  }
  std::vector<PipelinedScript> pipelined;
  pipelined.reserve(calls.size());
  for (const RenewalCall& call : calls) pipelined.push_back(PipelinedScript{call.script, call.keys, call.args});
  const std::string what = "(" + std::to_string(renewals.size()) + " leases of every kind)";
  const ReplySource where("extend", what, node.displayAddress());
  std::vector<ReplyPtr> replies;
  bool replicated = true;
  try {
    replies = node.pool().run([&](Connection& connection) {
      std::vector<ReplyPtr> got = runScriptsPipelined(connection, pipelined);
      replicated = renewalsReplicated(options, connection, where);
      return got;
    });
  } catch (const ConnectionError&) {
    // The node may have failed over: renewEachKind follows the topology.
    for (const RenewalCall& call : calls) elsewhere.insert(elsewhere.end(), call.members.begin(), call.members.end());
    return;
  }
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const std::vector<std::size_t>& members = calls[c].members;
    const redisReply& reply = *replies[c];
    if (reply.type == REDIS_REPLY_ERROR && topology.retryable(replyText(reply))) {
      elsewhere.insert(elsewhere.end(), members.begin(), members.end());
      continue;
    }
    try {
      const std::vector<bool> flags = readFlagsReply(reply, members.size(), where);
      for (std::size_t j = 0; j < members.size(); ++j) {
        // A lease this node still holds is not renewed until its replicas have it.
        results[members[j]].extended = replicated && flags[j];
        results[members[j]].unknown = !replicated;
      }
    } catch (const LockError& error) {
      logger()->warn("dlock: renewing {} lease(s) on {}: {}", members.size(), node.displayAddress(), error.what());
      for (const std::size_t i : members) results[i].unknown = true;
    }
  }
}

}  // namespace

std::vector<ExtendResult> RedisOperator::renewBatch(const std::vector<Renewal>& renewals) {
  std::vector<ExtendResult> results(renewals.size());
  if (renewals.empty()) return results;
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const bool sharded = topology.sharded();
  std::vector<std::uint16_t> slots;
  slots.reserve(renewals.size());
  for (const Renewal& renewal : renewals) slots.push_back(sharded ? KeyNames(options.keyPrefix, renewal.key, true).slot() : 0);
  const std::vector<RedisNode*> owners = topology.owners(slots);
  std::map<RedisNode*, NodeGroups> byNode;
  std::vector<std::size_t> elsewhere;  // for renewEachKind
  for (std::size_t i = 0; i < renewals.size(); ++i) {
    if (owners[i] == nullptr) {
      elsewhere.push_back(i);
    } else {
      byNode[owners[i]][{scriptKindOf(renewals[i].kind), slots[i], renewals[i].ttl.count()}].push_back(i);
    }
  }
  for (const auto& [node, groups] : byNode) renewOnNode(*node, groups, renewals, topology, options, results, elsewhere);
  if (elsewhere.empty()) return results;
  std::vector<Renewal> rest;
  rest.reserve(elsewhere.size());
  for (const std::size_t i : elsewhere) rest.push_back(renewals[i]);
  std::vector<ExtendResult> settled;
  try {
    settled = renewEachKind(*this, rest);
  } catch (const ConnectionError&) {
    // Nothing settled, for want of a connection: the caller learns why, as from extendAll.
    if (rest.size() == renewals.size()) throw;
    settled.assign(rest.size(), ExtendResult{false, true, {}});
  }
  for (std::size_t j = 0; j < elsewhere.size(); ++j) results[elsewhere[j]] = settled[j];
  return results;
}

}  // namespace dlock
