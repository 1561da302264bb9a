// SPDX-License-Identifier: Apache-2.0
// RedisOperator's fair queue (IFairOperator): the calls of FairScripts.h; their reply readers are
// QueueReplies.h's, the hand-off watch of one waiter GrantWatch.h's.
#include <chrono>
#include <string>

#include "Errors.h"
#include "FairScripts.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "QueueReplies.h"
#include "RedisOperatorOptions.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

using namespace detail;
using std::chrono::milliseconds;

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
                  result = readQueueAcquireReply(reply, describeCall("lock", key, node), 1);
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
                  result = readQueueReleaseReply(reply, describeCall("unlock", key, node), 1);
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
  return watchGrantChannel(topology, options.retryBudget, names.slot(), names.grantChannel(grantListener()),
                           std::string(token), 1);
}

}  // namespace dlock
