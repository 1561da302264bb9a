// SPDX-License-Identifier: Apache-2.0
// RedisOperator's semaphore (ISemaphoreOperator): the calls of SemaphoreScripts.h and their strict
// reply readers; a waiter's grant watch is GrantWatch.h's.
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "Errors.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "RedisOperatorOptions.h"
#include "QueueReplies.h"
#include "ScriptCall.h"
#include "SemaphoreScripts.h"
#include "Topology.h"
#include "dlock/ISemaphoreOperator.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {
namespace detail {
namespace {

using std::chrono::milliseconds;

// The three keys of one semaphore (SemaphoreScripts.h), under its name's hash tag, and the base
// of its grant channels, which goes as ARGV (as the fair lock's: a channel is no key).
struct SemaphoreNames {
  SemaphoreNames(const RedisOperatorOptions& options, std::string_view name, bool sharded)
      : names(options.keyPrefix, name, sharded),
        state(names.semaphore("state")),
        deadlines(names.semaphore("deadlines")),
        queue(names.semaphore("queue")),
        channel(names.semaphore("granted")),
        keyLife(std::to_string(options.fenceTtl.count())),
        // As the release records of the locks: the record outlives every retry of its call.
        recordLife(std::to_string((options.commandTimeout + options.retryBudget).count())) {}

  [[nodiscard]] Argv keys() const { return {state, deadlines, queue}; }

  const KeyNames names;
  const std::string state;
  const std::string deadlines;
  const std::string queue;
  const std::string channel;
  const std::string keyLife;
  const std::string recordLife;
};

// {1, "fence", "now", validity}, {0, next expiry, "now", position}, {2, 0, "now", 0} (a spent
// token, refused), or {3, "capacity", "now", 0} (stored with another capacity: ConfigError).
SemaphoreAcquireResult readSemaphoreAcquireReply(const redisReply& raw, std::string_view name, std::uint32_t capacity,
                                                 const std::string& node, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 4, where);
  SemaphoreAcquireResult result;
  const long long status = integerAt(reply, 0, where);
  result.backendMillis = static_cast<std::int64_t>(decimalAt(reply, 2, kMaxFencingToken, where));
  const long long fourth = integerAt(reply, 3, where);
  if (status == 1) {
    result.acquired = true;
    result.fencingToken = decimalAt(reply, 1, kMaxFencingToken, where);
    if (result.fencingToken == 0) unexpectedReply(where, "a fencing token of 0");
    if (fourth < 0) unexpectedReply(where, "a negative validity");
    result.validity = milliseconds(fourth);
  } else if (status == 0 || status == 2) {
    const long long expiry = integerAt(reply, 1, where);
    result.nextExpiry = milliseconds(std::max(expiry, 0LL));
    result.position = static_cast<std::uint32_t>(std::clamp<long long>(fourth, 0, 1LL << 30));
  } else if (status == 3) {
    throwCapacityMismatch(name, node, decimalAt(reply, 1, kMaxFencingToken, where), capacity);
  } else {
    unexpectedReply(where, "status " + std::to_string(status));
  }
  return result;
}

// An integer from 0 to `max`.
std::uint32_t readBoundedInteger(const redisReply& reply, long long max, const std::string& where) {
  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where);
  if (reply.type != REDIS_REPLY_INTEGER || reply.integer < 0 || reply.integer > max) {
    unexpectedReply(where, "expected an integer from 0 to " + std::to_string(max));
  }
  return static_cast<std::uint32_t>(reply.integer);
}

std::string textAt(const redisReply& reply, std::size_t index, const std::string& where) {
  const redisReply* element = reply.element[index];
  if (element == nullptr || element->type != REDIS_REPLY_STRING) {
    unexpectedReply(where, "element " + std::to_string(index) + " is not text");
  }
  return std::string(textOf(*element));
}

std::uint32_t permitsAt(const redisReply& reply, std::size_t index, const std::string& where) {
  return static_cast<std::uint32_t>(
      std::clamp<long long>(integerAt(reply, index, where), 0, static_cast<long long>(kMaxSemaphorePermits)));
}

// {"capacity", "now", {token, permits, remaining, "fence"}..., {token, permits}...}.
SemaphoreInfo readSemaphoreInspectReply(const redisReply& raw, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 4, where);
  SemaphoreInfo info;
  info.capacity = static_cast<std::uint32_t>(decimalAt(reply, 0, kMaxSemaphorePermits, where));
  const redisReply* holders = reply.element[2];
  const redisReply* waiters = reply.element[3];
  if (holders == nullptr || holders->type != REDIS_REPLY_ARRAY || waiters == nullptr ||
      waiters->type != REDIS_REPLY_ARRAY) {
    unexpectedReply(where, "holders and waiters are not arrays");
  }
  for (std::size_t i = 0; i < holders->elements; ++i) {
    const redisReply& holder = arrayOf(*holders->element[i], 4, where);
    SemaphoreInfo::Holder each;
    each.token = textAt(holder, 0, where);
    each.permits = permitsAt(holder, 1, where);
    each.remaining = milliseconds(std::max(integerAt(holder, 2, where), 0LL));
    each.fencingToken = decimalAt(holder, 3, kMaxFencingToken, where);
    info.inUse += each.permits;
    info.holders.push_back(std::move(each));
  }
  for (std::size_t i = 0; i < waiters->elements; ++i) {
    const redisReply& waiter = arrayOf(*waiters->element[i], 2, where);
    info.waiters.push_back(SemaphoreInfo::Waiter{textAt(waiter, 0, where), permitsAt(waiter, 1, where)});
  }
  return info;
}

}  // namespace
}  // namespace detail

using namespace detail;

SemaphoreAcquireResult RedisOperator::doAcquirePermits(std::string_view name, std::string_view token,
                                                       std::uint32_t permits, std::uint32_t capacity,
                                                       milliseconds lease, milliseconds waiterLease) {
  Topology& topology = this->topology();
  const SemaphoreNames names(operatorOptions(), name, topology.sharded());
  const std::string permitsText = std::to_string(permits);
  const std::string capacityText = std::to_string(capacity);
  const std::string leaseText = std::to_string(lease.count());
  const std::string waiterLeaseText = std::to_string(waiterLease.count());
  Call call("acquirePermits", name, operatorOptions().retryBudget);
  SemaphoreAcquireResult result;
  runScriptCall(topology, call, names.names.slot(), semaphoreAcquireScript(topology.sharded()), names.keys(),
                {token, permitsText, capacityText, leaseText, waiterLeaseText, names.channel, grantListener(),
                 names.keyLife},
                [&](const redisReply& reply, const std::string& node) {
                  result = readSemaphoreAcquireReply(reply, name, capacity, node,
                                                     describeCall("acquirePermits", name, node));
                });
  return result;
}

ReleaseResult RedisOperator::doReleasePermits(std::string_view name, std::string_view token) {
  Topology& topology = this->topology();
  const SemaphoreNames names(operatorOptions(), name, topology.sharded());
  Call call("releasePermits", name, operatorOptions().retryBudget);
  ReleaseResult result;
  runScriptCall(topology, call, names.names.slot(), semaphoreReleaseScript(topology.sharded()), names.keys(),
                {token, names.channel, names.recordLife, names.keyLife},
                [&](const redisReply& reply, const std::string& node) {
                  result = readQueueReleaseReply(reply, describeCall("releasePermits", name, node),
                                                 kMaxSemaphorePermits);
                });
  return result;
}

bool RedisOperator::doExtendPermits(std::string_view name, std::string_view token, milliseconds lease) {
  Topology& topology = this->topology();
  const SemaphoreNames names(operatorOptions(), name, topology.sharded());
  const std::string leaseText = std::to_string(lease.count());
  Call call("extendPermits", name, operatorOptions().retryBudget);
  bool extended = false;
  runScriptCall(topology, call, names.names.slot(), semaphoreExtendScript(topology.sharded()), names.keys(),
                {token, leaseText, names.channel, names.keyLife},
                [&](const redisReply& reply, const std::string& node) {
                  extended = readBoundedInteger(reply, 1, describeCall("extendPermits", name, node)) == 1;
                });
  return extended;
}

bool RedisOperator::doLeavePermitQueue(std::string_view name, std::string_view token) {
  Topology& topology = this->topology();
  const SemaphoreNames names(operatorOptions(), name, topology.sharded());
  Call call("leavePermitQueue", name, operatorOptions().retryBudget);
  bool released = false;
  runScriptCall(topology, call, names.names.slot(), semaphoreLeaveScript(topology.sharded()), names.keys(),
                {token, names.channel, names.recordLife, names.keyLife},
                [&](const redisReply& reply, const std::string& node) {
                  released = readBoundedInteger(reply, 1, describeCall("leavePermitQueue", name, node)) == 1;
                });
  return released;
}

std::uint32_t RedisOperator::doResizeSemaphore(std::string_view name, std::uint32_t capacity) {
  Topology& topology = this->topology();
  const SemaphoreNames names(operatorOptions(), name, topology.sharded());
  const std::string capacityText = std::to_string(capacity);
  Call call("resizeSemaphore", name, operatorOptions().retryBudget);
  std::uint32_t admitted = 0;
  runScriptCall(topology, call, names.names.slot(), semaphoreResizeScript(topology.sharded()), names.keys(),
                {capacityText, names.channel, names.keyLife}, [&](const redisReply& reply, const std::string& node) {
                  admitted = readBoundedInteger(reply, kMaxSemaphorePermits,
                                                describeCall("resizeSemaphore", name, node));
                });
  return admitted;
}

SemaphoreInfo RedisOperator::doInspectSemaphore(std::string_view name) {
  Topology& topology = this->topology();
  const SemaphoreNames names(operatorOptions(), name, topology.sharded());
  Call call("inspectSemaphore", name, operatorOptions().retryBudget);
  SemaphoreInfo info;
  runScriptCall(topology, call, names.names.slot(), semaphoreInspectScript(), names.keys(), {},
                [&](const redisReply& reply, const std::string& node) {
                  info = readSemaphoreInspectReply(reply, describeCall("inspectSemaphore", name, node));
                });
  return info;
}

std::unique_ptr<IGrantWatch> RedisOperator::doWatchPermitGrants(std::string_view name, std::string_view token) {
  const std::shared_ptr<Topology>& topology = sharedTopology();
  const SemaphoreNames names(operatorOptions(), name, topology->sharded());
  return watchGrantChannel(topology, operatorOptions().retryBudget, names.names.slot(),
                           names.channel + ":" + grantListener(), std::string(token), 1);
}

std::string RedisOperator::semaphoreUnsupported() const {
  // As the fair lock's hand-off: an admission is written by another client's release (or by any
  // call that reclaims an expired lease), which does not wait for replicas, so a WAIT on the
  // waiter's connection would not cover it. Refused rather than silently weaker.
  if (operatorOptions().waitReplicas > 0) {
    return "wait_replicas is not supported by the semaphore (an admission is not acknowledged by replicas)";
  }
  return {};
}

}  // namespace dlock
