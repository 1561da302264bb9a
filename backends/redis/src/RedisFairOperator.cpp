// SPDX-License-Identifier: Apache-2.0
// RedisOperator's fair queue (IFairOperator): the calls of FairScripts.h, their strict reply
// readers, and the hand-off watch of one waiter.
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>

#include "Errors.h"
#include "FairScripts.h"
#include "KeyNames.h"
#include "RedisNode.h"
#include "RedisOperatorOptions.h"
#include "ScriptCall.h"
#include "Subscriber.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {
namespace detail {
namespace {

using std::chrono::milliseconds;

// A hand-off watch that could not follow its key to another node pauses this long (as the
// release watch does) before the waiter asks again.
constexpr milliseconds kRewatchPause{100};

// This process's listener (FairScripts.h): where the hand-offs to its waiters are published, so a
// hand-off wakes the heir's process only. Random across hosts, the pid apart from a forked child
// (which has its own subscriptions). Made before main: no lazy initialisation a fork could catch
// half done. Uniqueness is all it needs; a collision only costs the two processes each other's
// hand-off messages, which each ignores (a waiter listens for its own token).
std::uint64_t randomListenerBase() noexcept {
  std::uint64_t base = 0;
  if (::getrandom(&base, sizeof base, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof base)) {
    base = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
           reinterpret_cast<std::uintptr_t>(&base);
  }
  return base;
}
const std::uint64_t kListenerBase = randomListenerBase();

// "0", 17 random digits, the pid: digits only and a fraction below 0.1 in a place's ttl field.
// Written once per thread and process, not per attempt (getpid is a system call): the cache is
// redone when forkGeneration() moved, which RedisOperator's ForkLocal state has the process watch.
const std::string& grantListener() {
  thread_local std::uint64_t generation = ~std::uint64_t{0};
  thread_local std::string listener;
  const std::uint64_t now = forkGeneration();
  if (generation != now) {
    char text[48];
    const int length = std::snprintf(text, sizeof text, "0%017llu%ld",
                                     static_cast<unsigned long long>(kListenerBase % 100'000'000'000'000'000ULL),
                                     static_cast<long>(::getpid()));
    listener.assign(text, static_cast<std::size_t>(length));
    generation = now;
  }
  return listener;
}

[[noreturn]] void unexpected(const std::string& where, const std::string& what) {
  throw BackendError("dlock: " + where + ": unexpected reply: " + what);
}

std::string describeCall(const char* operation, std::string_view key, const std::string& node) {
  return std::string(operation) + " " + quoteKey(key) + " on " + node;
}

// Decimal digits without sign or leading zero, at most `max`; nullopt otherwise.
bool parseDecimal(std::string_view text, std::uint64_t max, std::uint64_t& value) {
  if (text.empty() || text.size() > 19 || (text.size() > 1 && text.front() == '0')) return false;
  value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value <= max;
}

std::string_view textOf(const redisReply& element) { return std::string_view(element.str, element.len); }

const redisReply& arrayOf(const redisReply& reply, std::size_t size, const std::string& where) {
  if (reply.type == REDIS_REPLY_ERROR) throwReplyError(reply, where);
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != size || reply.element == nullptr) {
    unexpected(where, "expected an array of " + std::to_string(size) + " elements");
  }
  return reply;
}

long long integerAt(const redisReply& reply, std::size_t index, const std::string& where) {
  const redisReply* element = reply.element[index];
  if (element == nullptr || element->type != REDIS_REPLY_INTEGER) {
    unexpected(where, "element " + std::to_string(index) + " is not an integer");
  }
  return element->integer;
}

std::uint64_t decimalAt(const redisReply& reply, std::size_t index, std::uint64_t max, const std::string& where) {
  const redisReply* element = reply.element[index];
  std::uint64_t value = 0;
  if (element == nullptr || element->type != REDIS_REPLY_STRING || !parseDecimal(textOf(*element), max, value)) {
    unexpected(where, "element " + std::to_string(index) + " is not a number from 0 to " + std::to_string(max));
  }
  return value;
}

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
    if (result.fencingToken == 0) unexpected(where, "a fencing token of 0");
    // Ours already: what is left of the lease (0, the whole ttl, for a fresh acquisition). A lease
    // in its last millisecond leaves 1, never "the whole ttl".
    result.validity = milliseconds(fourth > 0 ? fourth : 0);
    if (fourth < 0) unexpected(where, "a negative validity");
  } else if (status == 0) {
    const long long pttl = integerAt(reply, 1, where);
    result.holderTtl = milliseconds(pttl > 0 ? pttl : 0);
    result.position = static_cast<std::uint32_t>(std::clamp<long long>(fourth, 0, 1LL << 30));
  } else {
    unexpected(where, "status " + std::to_string(status));
  }
  return result;
}

// {1, 1|0}, {2, 0} or {0, 0}.
ReleaseResult readFairReleaseReply(const redisReply& raw, const std::string& where) {
  const redisReply& reply = arrayOf(raw, 2, where);
  const long long status = integerAt(reply, 0, where);
  const long long handed = integerAt(reply, 1, where);
  if (status < 0 || status > 2 || handed < 0 || handed > 1 || (status != 1 && handed != 0)) {
    unexpected(where, "status " + std::to_string(status));
  }
  ReleaseResult result;
  result.released = status != 0;
  result.releasedEarlier = status == 2;
  result.notified = static_cast<std::uint32_t>(handed);
  return result;
}

// `token|fence|now-ms|claim-ms`, the token already matched by the subscription.
Grant readGrant(std::string_view payload) {
  std::string_view fields[4];
  std::size_t count = 0;
  for (std::size_t start = 0; count < 4;) {
    const std::size_t bar = payload.find('|', start);
    fields[count++] = payload.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  std::uint64_t fence = 0;
  std::uint64_t at = 0;
  std::uint64_t claim = 0;
  Grant grant;
  if (count != 4 || !parseDecimal(fields[1], kMaxFencingToken, fence) || fence == 0 ||
      !parseDecimal(fields[2], kMaxFencingToken, at) ||
      !parseDecimal(fields[3], static_cast<std::uint64_t>(kMaxLeaseTime.count()), claim)) {
    grant.kind = Grant::Kind::Recheck;  // not a hand-off we can read: ask the server
    return grant;
  }
  grant.kind = Grant::Kind::Granted;
  grant.fencingToken = fence;
  grant.backendMillis = static_cast<std::int64_t>(at);
  grant.lease = milliseconds(claim);
  return grant;
}

struct GrantSubscription {
  std::unique_ptr<IMessageWatch> watch;
  RedisNode* node = nullptr;
};

GrantSubscription subscribeGrants(Topology& topology, milliseconds budget, std::uint16_t slot,
                                  const std::string& channel, const std::string& token) {
  GrantSubscription subscription;
  subscription.node = subscribeOn(topology, budget, slot, channel, [&](const std::shared_ptr<Subscriber>& subscriber) {
    subscription.watch = subscriber->watchFor(channel, token);
  });
  return subscription;
}

// One waiter's hand-off messages, following its key as the release watch does (a failover, a
// slot moved): when the node it listens on no longer serves the key, or the subscription may have
// missed a message, it subscribes again where the key lives now and answers Recheck, as a
// hand-off may have gone unheard.
class FollowingGrantWatch final : public IGrantWatch {
 public:
  FollowingGrantWatch(std::shared_ptr<Topology> topology, milliseconds budget, std::uint16_t slot, std::string channel,
                      std::string token, GrantSubscription subscription)
      : topology_(std::move(topology)),
        budget_(budget),
        slot_(slot),
        channel_(std::move(channel)),
        token_(std::move(token)),
        current_(std::move(subscription)) {}

  Grant waitForGrant(milliseconds timeout) override {
    if (current_.watch != nullptr && topology_->serves(current_.node, slot_)) {
      MessageWait heard = current_.watch->waitForMessage(timeout);
      if (heard.outcome == MessageWait::Outcome::Message) return readGrant(heard.payload);
      if (heard.outcome == MessageWait::Outcome::TimedOut) return Grant{};
      // A possible miss: subscribe again (at once when the channel is still confirmed), as the
      // subscription may be gone for good (a dropped subscriber, a channel the node let go).
    }
    current_.watch.reset();
    try {
      current_ = subscribeGrants(*topology_, budget_, slot_, channel_, token_);
    } catch (const LockError& error) {
      logger()->debug("dlock: hand-off watch on {} not moved yet: {}", topology_->describe(), error.what());
      std::this_thread::sleep_for(std::min(timeout, kRewatchPause));
    }
    return Grant{Grant::Kind::Recheck, 0, 0};
  }

 private:
  const std::shared_ptr<Topology> topology_;
  const milliseconds budget_;
  const std::uint16_t slot_;
  const std::string channel_;
  const std::string token_;
  GrantSubscription current_;
};

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
                  result = readFairReleaseReply(reply, describeCall("unlock", key, node));
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
                    unexpected(where, "expected 0 or 1");
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
  std::string channel = names.grantChannel(grantListener());
  std::string owner(token);
  GrantSubscription subscription = subscribeGrants(*topology, options.retryBudget, names.slot(), channel, owner);
  return std::make_unique<FollowingGrantWatch>(topology, options.retryBudget, names.slot(), std::move(channel),
                                               std::move(owner), std::move(subscription));
}

}  // namespace dlock
