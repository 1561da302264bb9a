// SPDX-License-Identifier: Apache-2.0
// RedisOperator's conditions (IConditionOperator): the calls of ConditionScripts.h and the reading
// of their replies; a signalled waiter of an exclusive key hears it as a fair waiter hears a
// hand-off (GrantWatch.h), on the key's signal channel and its process's listener.
#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "RenewalCalls.h"
#include "ConditionScripts.h"
#include "Errors.h"
#include "GrantWatch.h"
#include "KeyNames.h"
#include "QueueReplies.h"
#include "RedisOperatorOptions.h"
#include "Replies.h"
#include "ScriptCall.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {
namespace detail {
namespace {

using std::chrono::milliseconds;

// Waiters per condRenew command in a batch renewal.
constexpr std::size_t kRenewChunk = 1000;
// A signalAll moves at most every waiter; the reader only bounds what it believes.
constexpr long long kMaxMoved = 1LL << 30;

// One condition's names, kept while a call runs (an Argv holds views).
struct ConditionKeys {
  ConditionKeys(const RedisOperatorOptions& options, std::string_view key, std::string_view name, bool sharded)
      : names(options.keyPrefix, key, sharded),
        waiters(names.condition("waiters", name)),
        leases(names.condition("leases", name)) {}

  const KeyNames names;
  const std::string waiters, leases;
};

// {1, notified, position}, {2, 0, position} or {0, 0, 0}.
AwaitResult readAwaitReply(const redisReply& raw, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 3, where);
  const long long status = integerAt(reply, 0, where);
  const long long notified = integerAt(reply, 1, where);
  const long long position = integerAt(reply, 2, where);
  if (status < 0 || status > 2 || notified < 0 || notified > kMaxMoved || position < 0 || position > kMaxMoved ||
      (status == 1 && position == 0) || (status == 0 && (notified != 0 || position != 0))) {
    unexpectedReply(where, "expected {1, notified, position}, {2, 0, position} or {0, 0, 0}");
  }
  AwaitResult result;
  result.awaiting = status != 0;
  result.awaitingEarlier = status == 2;
  result.notified = static_cast<std::uint32_t>(notified);
  result.position = static_cast<std::uint32_t>(position);
  return result;
}

// {1, moved} or {0, 0}.
SignalResult readSignalReply(const redisReply& raw, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 2, where);
  const long long owner = integerAt(reply, 0, where);
  const long long moved = integerAt(reply, 1, where);
  if ((owner != 0 && owner != 1) || moved < 0 || moved > kMaxMoved || (owner == 0 && moved != 0)) {
    unexpectedReply(where, "expected {1, moved} or {0, 0}");
  }
  return SignalResult{owner == 1, static_cast<std::uint32_t>(moved)};
}

// {"now", place, "lease end"...}: the token of each live place and what is left of its lease.
ConditionInfo readConditionInspectReply(const redisReply& raw, const std::string& where) {
  if (raw.type == REDIS_REPLY_ERROR) throwReplyError(raw, where);
  if (raw.type != REDIS_REPLY_ARRAY || raw.elements % 2 != 1) unexpectedReply(where, "expected now and place pairs");
  const std::uint64_t now = decimalAt(raw, 0, kMaxFencingToken, where);
  ConditionInfo info;
  for (std::size_t i = 1; i < raw.elements; i += 2) {
    const redisReply* place = raw.element[i];
    const std::string_view text = place->type == REDIS_REPLY_STRING ? textOf(*place) : "";
    const std::size_t bar = text.find('|');
    const std::uint64_t ends = decimalAt(raw, i + 1, kMaxFencingToken, where);
    if (bar == 0 || bar == std::string_view::npos || ends <= now) unexpectedReply(where, "a place without a live lease");
    info.waiters.push_back({std::string(text.substr(0, bar)), milliseconds(ends - now)});
  }
  return info;
}

std::string recordFloor(const RedisOperatorOptions& options) {
  return std::to_string((options.commandTimeout + options.retryBudget).count());
}

}  // namespace

RenewalCalls awaitRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                               const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members) {
  // As doRenewAwaitAll's: {waiters, leases} and {token, ttl} per waiter, after the lease and listener.
  RenewalCalls calls;
  for (std::size_t start = 0; start < members.size(); start += kRenewChunk) {
    const std::size_t end = std::min(members.size(), start + kRenewChunk);
    RenewalCall& call = calls.emplace_back();
    call.script = &conditionRenewScript();
    call.args.insert(call.args.end(),
                     {call.keep(std::to_string(renewals[members[start]].ttl.count())), grantListener()});
    for (std::size_t j = start; j < end; ++j) {
      const Renewal& renewal = renewals[members[j]];
      const ConditionKeys keys(options, renewal.key, renewal.condition, sharded);
      call.keys.insert(call.keys.end(), {call.keep(keys.waiters), call.keep(keys.leases)});
      call.args.insert(call.args.end(), {renewal.token, call.keep(std::to_string(renewal.heldTtl.count()))});
      call.members.push_back(members[j]);
    }
  }
  return calls;
}

}  // namespace detail

using namespace detail;

AwaitResult RedisOperator::doAwait(std::string_view key, std::string_view name, std::string_view token,
                                   ConditionLock lock, std::uint64_t fencingToken, milliseconds ttl,
                                   milliseconds waiterLease) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const bool fair = lock == ConditionLock::Fair;
  const ConditionKeys keys(options, key, name, topology.sharded());
  const KeyNames& names = keys.names;
  const std::string record = names.releaseRecord(token);
  const std::string floor = recordFloor(options);
  const std::string ttlText = std::to_string(ttl.count());
  const std::string leaseText = std::to_string(waiterLease.count());
  // The lock's own release's KEYS and ARGV first, in its places (ConditionScripts.h).
  std::string channel, queue, fairLeases, fence, fenceTtl, owner, held, registry;
  Argv scriptKeys;
  Argv args;
  if (fair) {
    channel = names.grantChannel();
    queue = names.fairQueue();
    fairLeases = names.fairLeases();
    fence = names.fence();
    fenceTtl = std::to_string(options.fenceTtl.count());
    scriptKeys = {names.lock(), queue, fairLeases, fence, keys.waiters, keys.leases};
    held = std::to_string(fencingToken);
    args = {token, channel, record, floor, fenceTtl, ttlText, grantListener(), leaseText, held};
  } else {
    channel = names.channel();
    owner = names.owner();
    registry = names.waiters();  // the release wakes a process waiting in lock() (ReleaseSource.cpp)
    scriptKeys = {names.lock(), keys.waiters, keys.leases};
    args = {token, channel, record, floor, "0", registry, ttlText, grantListener(), leaseText, owner};
  }
  Call call("await", key, options.retryBudget);
  AwaitResult result;
  runScriptCall(topology, call, names.slot(), conditionAwaitScript(fair, topology.sharded()), scriptKeys, args,
                [&](const redisReply& reply, const std::string& node) {
                  result = readAwaitReply(reply, describeCall("await", key, node));
                });
  return result;
}

SignalResult RedisOperator::doSignal(std::string_view key, std::string_view name, std::string_view token,
                                     ConditionLock lock, bool all) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const bool fair = lock == ConditionLock::Fair;
  const ConditionKeys keys(options, key, name, topology.sharded());
  const std::string channel = keys.names.signalChannel();
  const std::string queue = keys.names.fairQueue();
  const std::string fairLeases = keys.names.fairLeases();
  Argv scriptKeys = {keys.names.lock(), keys.waiters, keys.leases};
  if (fair) scriptKeys.insert(scriptKeys.end(), {queue, fairLeases});
  const char* operation = all ? "signalAll" : "signal";
  Call call(operation, key, options.retryBudget);
  SignalResult result;
  runScriptCall(topology, call, keys.names.slot(), conditionSignalScript(topology.sharded()), scriptKeys,
                {token, all ? "all" : "one", fair ? "fair" : "exclusive", channel},
                [&](const redisReply& reply, const std::string& node) {
                  result = readSignalReply(reply, describeCall(operation, key, node));
                });
  return result;
}

std::vector<ExtendResult> RedisOperator::doRenewAwaitAll(const std::vector<ConditionWaiter>& waiters,
                                                         milliseconds waiterLease) {
  // One condRenew per slot and per kRenewChunk waiters (a script's keys share one slot on a
  // cluster), each through the retries of any call; a group that cannot be settled makes only its
  // own waiters unknown.
  std::vector<ExtendResult> results(waiters.size());
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const bool sharded = topology.sharded();
  const std::string leaseText = std::to_string(waiterLease.count());
  std::vector<ConditionKeys> keys;
  std::vector<std::string> ttls;
  keys.reserve(waiters.size());
  ttls.reserve(waiters.size());
  std::map<std::uint16_t, std::vector<std::size_t>> bySlot;
  for (std::size_t i = 0; i < waiters.size(); ++i) {
    keys.emplace_back(options, waiters[i].key, waiters[i].name, sharded);
    ttls.push_back(std::to_string(waiters[i].ttl.count()));
    bySlot[sharded ? keys.back().names.slot() : 0].push_back(i);
  }
  for (const auto& [slot, slotMembers] : bySlot) {
    const auto& members = slotMembers;  // a structured binding cannot be captured in C++17
    for (std::size_t start = 0; start < members.size(); start += kRenewChunk) {
      const std::size_t end = std::min(members.size(), start + kRenewChunk);
      Argv names;
      Argv args = {leaseText, grantListener()};
      for (std::size_t j = start; j < end; ++j) {
        const std::size_t i = members[j];
        names.insert(names.end(), {keys[i].waiters, keys[i].leases});
        args.insert(args.end(), {waiters[i].token, ttls[i]});
      }
      const std::string what = "(" + std::to_string(end - start) + " waiters)";
      Call call("renewAwait", what, options.retryBudget);
      try {
        runScriptCall(topology, call, keys[members[start]].names.slot(), conditionRenewScript(), names, args,
                      [&](const redisReply& reply, const std::string& node) {
                        const std::vector<bool> flags =
                            readFlagsReply(reply, end - start, describeCall("renewAwait", what, node));
                        for (std::size_t j = start; j < end; ++j) results[members[j]].extended = flags[j - start];
                      });
      } catch (const LockError& error) {
        logger()->warn("dlock: renewing {} condition waiter(s) on {}: {}", end - start, topology.describe(), error.what());
        for (std::size_t j = start; j < end; ++j) results[members[j]].unknown = true;
      }
    }
  }
  return results;
}

bool RedisOperator::doLeaveCondition(std::string_view key, std::string_view name, std::string_view token,
                                     milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ConditionKeys keys(options, key, name, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  Call call("leaveCondition", key, options.retryBudget);
  bool waiting = false;
  runScriptCall(topology, call, keys.names.slot(), conditionLeaveScript(), {keys.waiters, keys.leases},
                {token, ttlText, grantListener()}, [&](const redisReply& reply, const std::string& node) {
                  waiting = readFlagReply(reply, describeCall("leaveCondition", key, node));
                });
  return waiting;
}

std::unique_ptr<IGrantWatch> RedisOperator::doWatchSignals(std::string_view key, std::string_view token) {
  const std::shared_ptr<Topology>& topology = sharedTopology();
  const KeyNames names(operatorOptions().keyPrefix, key, topology->sharded());
  return watchGrantChannel(topology, operatorOptions().retryBudget, names.slot(), names.signalChannel(grantListener()),
                           std::string(token), 0);
}

ConditionInfo RedisOperator::doInspectCondition(std::string_view key, std::string_view name) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = operatorOptions();
  const ConditionKeys keys(options, key, name, topology.sharded());
  Call call("inspectCondition", key, options.retryBudget);
  ConditionInfo info;
  runScriptCall(topology, call, keys.names.slot(), conditionInspectScript(), {keys.waiters, keys.leases}, {},
                [&](const redisReply& reply, const std::string& node) {
                  info = readConditionInspectReply(reply, describeCall("inspectCondition", key, node));
                });
  return info;
}

std::string RedisOperator::conditionUnsupported() const {
  // As the fair lock's: await releases (or hands the key on) in a script that waits for no replica.
  if (operatorOptions().waitReplicas > 0) {
    return "wait_replicas is not supported by conditions (an await's release is not acknowledged by replicas)";
  }
  return {};
}

}  // namespace dlock
