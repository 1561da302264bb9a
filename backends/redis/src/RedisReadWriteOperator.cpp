// SPDX-License-Identifier: Apache-2.0
// RedisOperator's read-write locks (IReadWriteOperator): the calls of ReadWriteScripts.h and the
// reading of their replies (QueueReplies.h, Replies.h); hand-offs arrive as the fair lock's do
// (GrantWatch.h), on the read-write lock's own channel.
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "RenewalCalls.h"
#include "ChunkedRenewal.h"
#include "Errors.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "QueueReplies.h"
#include "ReadWriteScripts.h"
#include "RedisOperatorOptions.h"
#include "Replies.h"
#include "ReplicaWait.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {
namespace detail {
namespace {

using std::chrono::milliseconds;

// Holds per rwExtend command in a batch renewal.
constexpr std::size_t kExtendChunk = 1000;
// A release admits at most the whole queue; the reader only bounds what it believes.
constexpr long long kMaxAdmitted = 1LL << 30;

std::string_view letterOf(ReadWriteMode mode) { return mode == ReadWriteMode::Read ? "r" : "w"; }

// One name's keys in the scripts' KEYS order, kept while a call runs (an Argv holds views).
struct ReadWriteKeys {
  ReadWriteKeys(const RedisOperatorOptions& options, std::string_view name, bool sharded)
      : names(options.keyPrefix, name, sharded),
        writer(names.rwWriter()),
        readers(names.rwReaders()),
        queue(names.rwQueue()),
        leases(names.rwLeases()),
        fence(names.rwFence()) {}

  [[nodiscard]] Argv all() const { return {writer, readers, queue, leases, fence}; }

  const KeyNames names;
  const std::string writer, readers, queue, leases, fence;
};

// The time a record (or a tombstone) outlives every try of the call that may still be on its way.
std::string recordFloor(const RedisOperatorOptions& options) {
  return std::to_string((options.commandTimeout + options.retryBudget).count());
}

// {"now", writer, pttl, "fence", {reader, "lease end"}..., {place}...}.
ReadWriteInfo readInspectReply(const redisReply& raw, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 6, where);
  std::uint64_t now = 0;
  if (reply.element[0]->type != REDIS_REPLY_STRING || !parseDecimal(textOf(*reply.element[0]), kMaxFencingToken, now)) {
    unexpectedReply(where, "no server time");
  }
  ReadWriteInfo info;
  info.fencingToken = decimalAt(reply, 3, kMaxFencingToken, where);
  const redisReply* writer = reply.element[1];
  if (writer->type != REDIS_REPLY_STRING) unexpectedReply(where, "the writer is not text");
  if (writer->len > 0) {
    info.writer = ReadWriteInfo::Hold{std::string(textOf(*writer)), milliseconds(std::max(1LL, integerAt(reply, 2, where)))};
  }
  const redisReply* readers = reply.element[4];
  if (readers->type != REDIS_REPLY_ARRAY || readers->elements % 2 != 0) unexpectedReply(where, "readers");
  for (std::size_t i = 0; i < readers->elements; i += 2) {
    std::uint64_t ends = 0;
    if (readers->element[i]->type != REDIS_REPLY_STRING || readers->element[i + 1]->type != REDIS_REPLY_STRING ||
        !parseDecimal(textOf(*readers->element[i + 1]), kMaxFencingToken, ends) || ends <= now) {
      unexpectedReply(where, "a reader without a live lease");
    }
    info.readers.push_back({std::string(textOf(*readers->element[i])), milliseconds(ends - now)});
  }
  const redisReply* places = reply.element[5];
  if (places->type != REDIS_REPLY_ARRAY) unexpectedReply(where, "places");
  for (std::size_t i = 0; i < places->elements; ++i) {
    const std::string_view place = places->element[i]->type == REDIS_REPLY_STRING ? textOf(*places->element[i]) : "";
    const std::size_t bar = place.find('|');
    if (place.empty() || (place.front() != 'r' && place.front() != 'w') || bar == std::string_view::npos) {
      unexpectedReply(where, "a place that is not `mode token|ttl`");
    }
    info.waiters.push_back({std::string(place.substr(1, bar - 1)),
                            place.front() == 'r' ? ReadWriteMode::Read : ReadWriteMode::Write});
  }
  return info;
}

// Gives up what an acquire on `connection` took because its replicas did not acknowledge it
// (ReplicaWait.h): the hold's release, or for an upgrade a downgrade back to the read hold it had.
std::string undoHold(Connection& connection, bool sharded, const RedisOperatorOptions& options,
                     const ReadWriteKeys& keys, std::string_view token, ReadWriteMode mode, bool upgrade,
                     const std::string& ttlText, const std::string& where) {
  const std::string channel = keys.names.rwGrantChannel();
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  if (upgrade) {
    const ReplyPtr reply =
        runScript(connection, readWriteDowngradeScript(sharded), keys.all(), {token, ttlText, channel, fenceTtl});
    return readFlagReply(*reply, where) ? "downgraded it back to its read hold" : "it had ended already";
  }
  const std::string record = keys.names.rwRecord(token);
  const std::string floor = recordFloor(options);
  const ReplyPtr reply = runScript(connection, readWriteReleaseScript(sharded), keys.all(),
                                   {token, letterOf(mode), channel, record, floor, fenceTtl});
  return releasedOrEnded(readQueueReleaseReply(*reply, where, kMaxAdmitted));
}

// confirmAcquire (ReplicaWait.h) for an acquire or an upgrade of `token`'s `mode` hold.
void confirmHold(Connection& connection, bool sharded, const RedisOperatorOptions& options, const ReadWriteKeys& keys,
                 std::string_view token, ReadWriteMode mode, bool upgrade, const std::string& ttlText,
                 FairAcquireResult& result, const std::string& where) {
  confirmAcquire(
      options, connection, where, result,
      [&](Connection& on) -> bool {  // a bool, not a reference into the flags
        const ReplyPtr reply =
            runScript(on, readWriteExtendScript(), {keys.writer, keys.readers}, {ttlText, token, letterOf(mode)});
        return readFlagsReply(*reply, 1, where).front();
      },
      [&](Connection& on) { return undoHold(on, sharded, options, keys, token, mode, upgrade, ttlText, where); });
}

}  // namespace

RenewalCalls readWriteRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                                   const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members) {
  // As doExtendAll's: {writer, readers} and {token, mode} per hold, after the ttl.
  RenewalCalls calls;
  for (std::size_t start = 0; start < members.size(); start += kExtendChunk) {
    const std::size_t end = std::min(members.size(), start + kExtendChunk);
    RenewalCall& call = calls.emplace_back();
    call.script = &readWriteExtendScript();
    call.args.push_back(call.keep(std::to_string(renewals[members[start]].ttl.count())));
    for (std::size_t j = start; j < end; ++j) {
      const Renewal& renewal = renewals[members[j]];
      const ReadWriteKeys keys(options, renewal.key, sharded);
      call.keys.insert(call.keys.end(), {call.keep(keys.writer), call.keep(keys.readers)});
      call.args.insert(call.args.end(),
                       {renewal.token, letterOf(renewal.kind == RenewalKind::Write ? ReadWriteMode::Write : ReadWriteMode::Read)});
      call.members.push_back(members[j]);
    }
  }
  return calls;
}

}  // namespace detail

using namespace detail;

FairAcquireResult RedisOperator::doAcquire(std::string_view name, std::string_view token, ReadWriteMode mode,
                                           milliseconds ttl, milliseconds waiterLease) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, name, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  const std::string leaseText = std::to_string(waiterLease.count());
  const std::string channel = keys.names.rwGrantChannel();
  const std::string record = keys.names.rwRecord(token);
  const char* operation = mode == ReadWriteMode::Read ? "acquireRead" : "acquireWrite";
  Call call(operation, name, options.retryBudget);
  FairAcquireResult result;
  runScriptCallOn(topology, call, keys.names.slot(), readWriteAcquireScript(topology.sharded()), keys.all(),
                  {token, letterOf(mode), ttlText, fenceTtl, leaseText, channel, record, grantListener()},
                  [&](Connection& connection, const redisReply& reply, const std::string& node) {
                    const std::string where = describeCall(operation, name, node);
                    // A reader's fence is the last writer's: 0 before any write.
                    result = readQueueAcquireReply(reply, where, mode == ReadWriteMode::Write ? 1 : 0);
                    if (result.acquired) {
                      confirmHold(connection, topology.sharded(), options, keys, token, mode, false, ttlText, result,
                                  where);
                    }
                  });
  return result;
}

ReleaseResult RedisOperator::doRelease(std::string_view name, std::string_view token, ReadWriteMode mode) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, name, topology.sharded());
  const std::string channel = keys.names.rwGrantChannel();
  const std::string record = keys.names.rwRecord(token);
  const std::string floor = recordFloor(options);
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  const char* operation = mode == ReadWriteMode::Read ? "releaseRead" : "releaseWrite";
  Call call(operation, name, options.retryBudget);
  ReleaseResult result;
  runScriptCall(topology, call, keys.names.slot(), readWriteReleaseScript(topology.sharded()), keys.all(),
                {token, letterOf(mode), channel, record, floor, fenceTtl},
                [&](const redisReply& reply, const std::string& node) {
                  result = readQueueReleaseReply(reply, describeCall(operation, name, node), kMaxAdmitted);
                });
  return result;
}

bool RedisOperator::doDowngrade(std::string_view name, std::string_view token, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, name, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  const std::string channel = keys.names.rwGrantChannel();
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  Call call("downgrade", name, options.retryBudget);
  // No WAIT with wait_replicas: a downgrade only gives up exclusion. A replica promoted without it
  // still has this token as the writer, which excludes more; the read hold is then found lost.
  bool reads = false;
  runScriptCall(topology, call, keys.names.slot(), readWriteDowngradeScript(topology.sharded()), keys.all(),
                {token, ttlText, channel, fenceTtl}, [&](const redisReply& reply, const std::string& node) {
                  reads = readFlagReply(reply, describeCall("downgrade", name, node));
                });
  return reads;
}

FairAcquireResult RedisOperator::doTryUpgrade(std::string_view name, std::string_view token, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, name, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  Call call("tryUpgrade", name, options.retryBudget);
  FairAcquireResult result;
  runScriptCallOn(topology, call, keys.names.slot(), readWriteUpgradeScript(), keys.all(), {token, ttlText, fenceTtl},
                  [&](Connection& connection, const redisReply& reply, const std::string& node) {
                    const std::string where = describeCall("tryUpgrade", name, node);
                    result = readQueueAcquireReply(reply, where, 1);
                    if (result.acquired) {
                      confirmHold(connection, topology.sharded(), options, keys, token, ReadWriteMode::Write, true,
                                  ttlText, result, where);
                    }
                  });
  return result;
}

bool RedisOperator::doExtend(const ReadWriteLease& lease, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, lease.name, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  Call call("extend", lease.name, options.retryBudget);
  bool extended = false;
  runScriptCallOn(topology, call, keys.names.slot(), readWriteExtendScript(), {keys.writer, keys.readers},
                  {ttlText, lease.token, letterOf(lease.mode)},
                  [&](Connection& connection, const redisReply& reply, const std::string& node) {
                    const std::string where = describeCall("extend", lease.name, node);
                    extended = readFlagsReply(reply, 1, where).front();
                    // A grantee confirms its hand-off with this call: its write follows the
                    // hand-off's in the replication stream, so the WAIT after it covers both.
                    if (extended) requireRenewalReplicated(options, connection, where);
                  });
  return extended;
}

std::vector<ExtendResult> RedisOperator::doExtendAll(const std::vector<ReadWriteLease>& leases, milliseconds ttl) {
  // One rwExtend per slot and chunk (ChunkedRenewal.h).
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const bool sharded = topology.sharded();
  const std::string ttlText = std::to_string(ttl.count());
  std::vector<ReadWriteKeys> keys;
  keys.reserve(leases.size());
  HoldsBySlot bySlot;
  for (std::size_t i = 0; i < leases.size(); ++i) {
    keys.emplace_back(options, leases[i].name, sharded);
    bySlot[sharded ? keys.back().names.slot() : 0].push_back(i);
  }
  return renewInChunks(topology, options, bySlot, leases.size(), kExtendChunk, "read-write holds",
                       [&](Call& call, std::uint16_t, const std::vector<std::size_t>& holds,
                           const ConnectionReader& read) {
                         Argv names;
                         Argv args = {ttlText};
                         for (const std::size_t i : holds) {
                           names.insert(names.end(), {keys[i].writer, keys[i].readers});
                           args.insert(args.end(), {leases[i].token, letterOf(leases[i].mode)});
                         }
                         runScriptCallOn(topology, call, keys[holds.front()].names.slot(), readWriteExtendScript(),
                                         names, args, read);
                       });
}

bool RedisOperator::doLeave(std::string_view name, std::string_view token, ReadWriteMode mode, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, name, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  const std::string channel = keys.names.rwGrantChannel();
  const std::string record = keys.names.rwRecord(token);
  const std::string floor = recordFloor(options);
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  Call call("leaveReadWriteQueue", name, options.retryBudget);
  bool released = false;
  runScriptCall(topology, call, keys.names.slot(), readWriteLeaveScript(topology.sharded()), keys.all(),
                {token, letterOf(mode), ttlText, channel, record, floor, grantListener(), fenceTtl},
                [&](const redisReply& reply, const std::string& node) {
                  released = readFlagReply(reply, describeCall("leaveReadWriteQueue", name, node));
                });
  return released;
}

std::unique_ptr<IGrantWatch> RedisOperator::doWatch(std::string_view name, std::string_view token) {
  const std::shared_ptr<Topology>& topology = sharedTopology();
  const KeyNames names(operatorOptions().keyPrefix, name, topology->sharded());
  return watchGrantChannel(topology, operatorOptions().retryBudget, names.slot(),
                           names.rwGrantChannel().append(":").append(grantListener()), std::string(token), 0);
}

ReadWriteInfo RedisOperator::doInspect(std::string_view name) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ReadWriteKeys keys(options, name, topology.sharded());
  Call call("inspectReadWrite", name, options.retryBudget);
  ReadWriteInfo info;
  runScriptCall(topology, call, keys.names.slot(), readWriteInspectScript(), keys.all(), {},
                [&](const redisReply& reply, const std::string& node) {
                  info = readInspectReply(reply, describeCall("inspectReadWrite", name, node));
                });
  return info;
}

}  // namespace dlock
