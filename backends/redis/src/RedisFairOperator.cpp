// SPDX-License-Identifier: Apache-2.0
// RedisOperator's fair queue (IFairOperator): the calls of FairScripts.h and their strict reply
// readers; the hand-off watch of one waiter is GrantWatch.h's.
#include <algorithm>
#include <chrono>
#include <utility>

#include "Errors.h"
#include "FairScripts.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "RedisNode.h"
#include "RedisOperatorOptions.h"
#include "ReplyFields.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {
namespace detail {
namespace {

using std::chrono::milliseconds;

// {1, "fence", "now", validity} or {0, pttl, "now", position}.
FairAcquireResult readFairAcquireReply(const redisReply& raw, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 4, where);
  FairAcquireResult result;
  const long long status = integerAt(reply, 0, where);
  result.backendMillis = static_cast<std::int64_t>(decimalAt(reply, 2, kMaxFencingToken, where));
  const long long fourth = integerAt(reply, 3, where);
  if (status == 1) {
    result.acquired = true;
    result.fencingToken = decimalAt(reply, 1, kMaxFencingToken, where);
    if (result.fencingToken == 0) unexpectedReply(where, "a fencing token of 0");
    // Ours already: what is left of the lease (0, the whole ttl, for a fresh acquisition). A lease
    // in its last millisecond leaves 1, never "the whole ttl".
    result.validity = milliseconds(fourth > 0 ? fourth : 0);
    if (fourth < 0) unexpectedReply(where, "a negative validity");
  } else if (status == 0) {
    const long long pttl = integerAt(reply, 1, where);
    result.holderTtl = milliseconds(pttl > 0 ? pttl : 0);
    result.position = static_cast<std::uint32_t>(std::clamp<long long>(fourth, 0, 1LL << 30));
  } else {
    unexpectedReply(where, "status " + std::to_string(status));
  }
  return result;
}

}  // namespace
}  // namespace detail

using namespace detail;

FairAcquireResult RedisOperator::fairLock(std::string_view key, std::string_view token, milliseconds ttl,
                                          milliseconds waiterLease) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string queue = names.fairQueue();
  const std::string leases = names.fairLeases();
  const std::string fence = names.fence();
  const std::string channel = names.grantChannel();
  const std::string ttlText = std::to_string(ttl.count());
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  const std::string leaseText = std::to_string(waiterLease.count());
  const std::string record = names.releaseRecord(token);
  Call call("lock", key, options.retryBudget);
  FairAcquireResult result;
  runScriptCall(topology, call, names.slot(), fairAcquireScript(topology.sharded()), {names.lock(), queue, leases, fence},
                {token, ttlText, fenceTtl, leaseText, channel, record, grantListener()}, [&](const redisReply& reply, const std::string& node) {
                  result = readFairAcquireReply(reply, describeCall("lock", key, node));
                });
  return result;
}

ReleaseResult RedisOperator::fairUnlock(std::string_view key, std::string_view token) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string queue = names.fairQueue();
  const std::string leases = names.fairLeases();
  const std::string fence = names.fence();
  const std::string channel = names.grantChannel();
  const std::string record = names.releaseRecord(token);
  // As the default release: the record outlives every retry of its call, and a caller's soon after.
  const std::string recordFloor = std::to_string((options.commandTimeout + options.retryBudget).count());
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  Call call("unlock", key, options.retryBudget);
  ReleaseResult result;
  runScriptCall(topology, call, names.slot(), fairReleaseScript(topology.sharded()), {names.lock(), queue, leases, fence},
                {token, channel, record, recordFloor, fenceTtl}, [&](const redisReply& reply, const std::string& node) {
                  result = readQueueReleaseReply(reply, 1, describeCall("unlock", key, node));
                });
  return result;
}

bool RedisOperator::leaveQueue(std::string_view key, std::string_view token, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string queue = names.fairQueue();
  const std::string leases = names.fairLeases();
  const std::string fence = names.fence();
  const std::string channel = names.grantChannel();
  const std::string ttlText = std::to_string(ttl.count());
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  const std::string record = names.releaseRecord(token);
  // The tombstone outlives every try of an attempt still on its way (as the release record).
  const std::string recordFloor = std::to_string((options.commandTimeout + options.retryBudget).count());
  Call call("leaveQueue", key, options.retryBudget);
  bool released = false;
  runScriptCall(topology, call, names.slot(), fairLeaveScript(topology.sharded()), {names.lock(), queue, leases, fence},
                {token, ttlText, fenceTtl, channel, record, recordFloor, grantListener()}, [&](const redisReply& reply, const std::string& node) {
                  const std::string where = describeCall("leaveQueue", key, node);
                  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where);
                  if (reply.type != REDIS_REPLY_INTEGER || (reply.integer != 0 && reply.integer != 1)) {
                    unexpectedReply(where, "expected 0 or 1");
                  }
                  released = reply.integer == 1;
                });
  return released;
}

std::string RedisOperator::fairUnsupported() const {
  // A hand-off is written by the releaser's script: a WAIT on the waiter's connection would not
  // cover it, and the releaser does not wait for replicas. Refused rather than silently weaker.
  if (operatorOptions().waitReplicas > 0) {
    return "wait_replicas is not supported by the fair lock (a hand-off is not acknowledged by replicas)";
  }
  return {};
}

std::unique_ptr<IGrantWatch> RedisOperator::watchGrants(std::string_view key, std::string_view token) {
  const std::shared_ptr<Topology>& topology = sharedTopology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology->sharded());
  return watchGrantsOn(topology, options.retryBudget, names.slot(), names.grantChannel(grantListener()),
                       std::string(token));
}

}  // namespace dlock
