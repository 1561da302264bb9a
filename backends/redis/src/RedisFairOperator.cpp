// SPDX-License-Identifier: Apache-2.0
// RedisOperator's fair queue (IFairOperator): the calls of FairScripts.h; their reply readers are
// QueueReplies.h's, the hand-off watch of one waiter GrantWatch.h's.
#include <chrono>
#include <string>
#include <string_view>

#include "Errors.h"
#include "FairScripts.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "QueueReplies.h"
#include "RedisOperatorOptions.h"
#include "ReplicaWait.h"
#include "Replies.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

using std::chrono::milliseconds;

namespace detail {
namespace {

// A fair key's calls' KEYS and the ARGV its release and leave share.
struct FairKeys {
  FairKeys(const RedisOperatorOptions& options, std::string_view key, std::string_view token, bool sharded)
      : names(options.keyPrefix, key, sharded),
        lock(names.lock()),
        queue(names.fairQueue()),
        leases(names.fairLeases()),
        fence(names.fence()),
        channel(names.grantChannel()),
        record(names.releaseRecord(token)),
        // As the default release: the record (or tombstone) outlives every retry of its call.
        recordFloor(std::to_string((options.commandTimeout + options.retryBudget).count())),
        fenceTtl(std::to_string(options.fenceTtl.count())) {}

  [[nodiscard]] Argv all() const { return {lock, queue, leases, fence}; }

  const KeyNames names;
  const std::string lock, queue, leases, fence, channel, record, recordFloor, fenceTtl;
};

// confirmAcquire (ReplicaWait.h) for fairLock. A hand-off heard on the grant watch is confirmed
// by IOperator::extend, whose WAIT covers it the same way; renewals are the default lock's.
void confirmFairHold(Connection& connection, bool sharded, const RedisOperatorOptions& options, const FairKeys& keys,
                     std::string_view token, const std::string& ttlText, FairAcquireResult& result,
                     const std::string& where) {
  confirmAcquire(
      options, connection, where, result,
      [&](Connection& on) {
        const ReplyPtr reply = runScript(on, extendScript(), {keys.lock}, {token, ttlText, keys.names.owner()});
        return readFlagReply(*reply, where);
      },
      [&](Connection& on) {
        const ReplyPtr reply = runScript(on, fairReleaseScript(sharded), keys.all(),
                                         {token, keys.channel, keys.record, keys.recordFloor, keys.fenceTtl});
        return releasedOrEnded(readQueueReleaseReply(*reply, where, 1));
      });
}

}  // namespace
}  // namespace detail

using namespace detail;

FairAcquireResult RedisOperator::fairLock(std::string_view key, std::string_view token, milliseconds ttl,
                                          milliseconds waiterLease) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const FairKeys keys(options, key, token, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  const std::string leaseText = std::to_string(waiterLease.count());
  Call call("lock", key, options.retryBudget);
  FairAcquireResult result;
  runScriptCallOn(topology, call, keys.names.slot(), fairAcquireScript(topology.sharded()), keys.all(),
                  {token, ttlText, keys.fenceTtl, leaseText, keys.channel, keys.record, grantListener()},
                  [&](Connection& connection, const redisReply& reply, const std::string& node) {
                    const std::string where = describeCall("lock", key, node);
                    result = readQueueAcquireReply(reply, where, 1);
                    if (result.acquired) {
                      confirmFairHold(connection, topology.sharded(), options, keys, token, ttlText, result, where);
                    }
                  });
  return result;
}

ReleaseResult RedisOperator::fairUnlock(std::string_view key, std::string_view token) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const FairKeys keys(options, key, token, topology.sharded());
  Call call("unlock", key, options.retryBudget);
  ReleaseResult result;
  runScriptCall(topology, call, keys.names.slot(), fairReleaseScript(topology.sharded()), keys.all(),
                {token, keys.channel, keys.record, keys.recordFloor, keys.fenceTtl},
                [&](const redisReply& reply, const std::string& node) {
                  result = readQueueReleaseReply(reply, describeCall("unlock", key, node), 1);
                });
  return result;
}

bool RedisOperator::leaveQueue(std::string_view key, std::string_view token, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const FairKeys keys(options, key, token, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  Call call("leaveQueue", key, options.retryBudget);
  bool released = false;
  runScriptCall(topology, call, keys.names.slot(), fairLeaveScript(topology.sharded()), keys.all(),
                {token, ttlText, keys.fenceTtl, keys.channel, keys.record, keys.recordFloor, grantListener()},
                [&](const redisReply& reply, const std::string& node) {
                  const std::string where = describeCall("leaveQueue", key, node);
                  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where);
                  if (reply.type != REDIS_REPLY_INTEGER || (reply.integer != 0 && reply.integer != 1)) {
                    unexpectedReply(where, "expected 0 or 1");
                  }
                  released = reply.integer == 1;
                });
  return released;
}

std::unique_ptr<IGrantWatch> RedisOperator::watchGrants(std::string_view key, std::string_view token) {
  const std::shared_ptr<Topology>& topology = sharedTopology();
  const RedisOperatorOptions& options = operatorOptions();
  const KeyNames names(options.keyPrefix, key, topology->sharded());
  return watchGrantChannel(topology, options.retryBudget, names.slot(), names.grantChannel(grantListener()),
                           std::string(token), 1);
}

}  // namespace dlock
