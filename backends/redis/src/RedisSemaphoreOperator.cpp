// SPDX-License-Identifier: Apache-2.0
// RedisOperator's semaphore (ISemaphoreOperator): the calls of SemaphoreScripts.h and their strict
// reply readers; a waiter's grant watch is GrantWatch.h's.
#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "RenewalCalls.h"
#include "ChunkedRenewal.h"
#include "Errors.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "QueueReplies.h"
#include "RedisOperatorOptions.h"
#include "ReplicaWait.h"
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

// Leases per semExtendMany in a batch renewal (each a few server calls inside the script).
constexpr std::size_t kExtendChunk = 1000;

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

// One semExtendMany (SemaphoreScripts.h) over `leases[holds...]`: each name's keys once, in the
// order of first use; its leases by the name's index.
class ExtendManyCall {
 public:
  ExtendManyCall(const std::vector<LeaseRef>& leases, const std::vector<std::size_t>& holds,
                 const std::map<std::string_view, SemaphoreNames>& byName, const std::string& leaseText) {
    std::map<std::string_view, std::size_t> index;  // from 1, as the script counts
    std::vector<const SemaphoreNames*> names;
    for (const std::size_t i : holds) {
      const auto [at, added] = index.emplace(leases[i].key, names.size() + 1);
      if (added) names.push_back(&byName.at(leases[i].key));
      indexes_.push_back(std::to_string(at->second));
    }
    count_ = std::to_string(names.size());
    args_ = {leaseText, names.front()->keyLife, count_};
    for (const SemaphoreNames* each : names) {
      keys_.insert(keys_.end(), {each->state, each->deadlines, each->queue});
      args_.emplace_back(each->channel);
    }
    for (std::size_t j = 0; j < holds.size(); ++j) args_.insert(args_.end(), {indexes_[j], leases[holds[j]].token});
  }

  [[nodiscard]] const Argv& keys() const { return keys_; }
  [[nodiscard]] const Argv& args() const { return args_; }

 private:
  std::vector<std::string> indexes_;  // the texts args_ points to
  std::string count_;
  Argv keys_;
  Argv args_;
};

}  // namespace

RenewalCalls permitRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                                const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members) {
  // As doExtendPermitsAll's: one semExtendMany per kExtendChunk leases.
  std::vector<LeaseRef> leases;
  leases.reserve(renewals.size());
  for (const Renewal& renewal : renewals) leases.push_back(LeaseRef{renewal.key, renewal.token});
  std::map<std::string_view, SemaphoreNames> byName;
  for (const std::size_t i : members) {
    byName.emplace(std::piecewise_construct, std::forward_as_tuple(leases[i].key),
                   std::forward_as_tuple(options, leases[i].key, sharded));
  }
  RenewalCalls calls;
  for (std::size_t start = 0; start < members.size(); start += kExtendChunk) {
    const auto first = members.begin() + static_cast<std::ptrdiff_t>(start);
    const std::vector<std::size_t> holds(first, first + static_cast<std::ptrdiff_t>(std::min(kExtendChunk, members.size() - start)));
    const std::string leaseText = std::to_string(renewals[holds.front()].ttl.count());  // batch views it
    const ExtendManyCall batch(leases, holds, byName, leaseText);
    RenewalCall& call = calls.emplace_back();
    call.script = &semaphoreExtendManyScript(sharded);
    for (const std::string_view key : batch.keys()) call.keys.push_back(call.keep(std::string(key)));
    for (const std::string_view arg : batch.args()) call.args.push_back(call.keep(std::string(arg)));
    call.members = holds;
  }
  return calls;
}

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
  runScriptCallOn(topology, call, names.names.slot(), semaphoreAcquireScript(topology.sharded()), names.keys(),
                  {token, permitsText, capacityText, leaseText, waiterLeaseText, names.channel, grantListener(),
                   names.keyLife},
                  [&](Connection& connection, const redisReply& reply, const std::string& node) {
                    const std::string where = describeCall("acquirePermits", name, node);
                    result = readSemaphoreAcquireReply(reply, name, capacity, node, where);
                    const bool sharded = topology.sharded();
                    confirmAcquire(
                        operatorOptions(), connection, where, result,
                        [&](Connection& on) {
                          const ReplyPtr extended = runScript(on, semaphoreExtendScript(sharded), names.keys(),
                                                              {token, leaseText, names.channel, names.keyLife});
                          return readBoundedInteger(*extended, 1, where) == 1;
                        },
                        [&](Connection& on) {
                          const ReplyPtr released = runScript(on, semaphoreReleaseScript(sharded), names.keys(),
                                                              {token, names.channel, names.recordLife, names.keyLife});
                          return releasedOrEnded(readQueueReleaseReply(*released, where, kMaxSemaphorePermits));
                        });
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
  runScriptCallOn(topology, call, names.names.slot(), semaphoreExtendScript(topology.sharded()), names.keys(),
                  {token, leaseText, names.channel, names.keyLife},
                  [&](Connection& connection, const redisReply& reply, const std::string& node) {
                    const std::string where = describeCall("extendPermits", name, node);
                    extended = readBoundedInteger(reply, 1, where) == 1;
                    // A grantee confirms its grant with this call: its write follows the grant's in
                    // the replication stream, so the WAIT after it covers the grant too.
                    if (extended) requireRenewalReplicated(operatorOptions(), connection, where);
                  });
  return extended;
}

std::vector<ExtendResult> RedisOperator::doExtendPermitsAll(const std::vector<LeaseRef>& leases, milliseconds lease) {
  // One semExtendMany per slot and chunk (ChunkedRenewal.h), as the read-write lock's batch.
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const bool sharded = topology.sharded();
  const std::string leaseText = std::to_string(lease.count());
  std::map<std::string_view, SemaphoreNames> byName;
  HoldsBySlot bySlot;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    auto at = byName.find(leases[i].key);
    if (at == byName.end()) {
      at = byName.emplace(std::piecewise_construct, std::forward_as_tuple(leases[i].key),
                          std::forward_as_tuple(options, leases[i].key, sharded)).first;
    }
    bySlot[sharded ? at->second.names.slot() : 0].push_back(i);
  }
  return renewInChunks(topology, options, bySlot, leases.size(), kExtendChunk, "permit leases",
                       [&](Call& call, std::uint16_t slot, const std::vector<std::size_t>& holds,
                           const ConnectionReader& read) {
                         const ExtendManyCall batch(leases, holds, byName, leaseText);
                         runScriptCallOn(topology, call, slot, semaphoreExtendManyScript(sharded), batch.keys(),
                                         batch.args(), read);
                       });
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

}  // namespace dlock
