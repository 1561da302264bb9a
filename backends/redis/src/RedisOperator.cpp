// SPDX-License-Identifier: Apache-2.0
#include "RenewalCalls.h"
#include "dlock/redis/RedisOperator.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "GrantWatch.h"
#include "Errors.h"
#include "ScriptCall.h"
#include "RedisOperatorOptions.h"
#include "ReplicaWait.h"
#include "Topology.h"
#include "dlock/detail/Fork.h"
#include "KeyNames.h"
#include "Replies.h"
#include "Reply.h"
#include "Scripts.h"
#include "Subscriber.h"
#include "WaitingKeys.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Log.h"
#include "dlock/detail/Wakeup.h"

namespace dlock {
namespace detail {
namespace {

using std::chrono::milliseconds;

// Leases per extendMany command in a batch renewal.
constexpr std::size_t kExtendChunk = 5000;

// How long a waiter's entry in a key's waiter registry lasts after its last try (server time): a
// waiting DefaultAttempt tries at least every 10 s (DefaultAttempt::kRecheck), so a live waiter's
// entry never lapses, and a waiter that stopped trying (stopped, hung) keeps its place at most
// this long; while it does, a release may wake its process for nothing, once (a killed one has no
// subscriber and is passed over).
constexpr const char* kWaiterRegistrationMs = "30000";

// The route of a call's next try: the ASK target of the last verdict, or where the topology says;
// waits (as the policy says) while no node serves the slot.
Route nextRoute(Topology& topology, Call& call, std::uint16_t slot, std::optional<Route>& via) {
  if (via) {
    Route asked = std::move(*via);
    via.reset();
    return asked;
  }
  while (true) {
    Route route = topology.route(slot);
    if (route.node != nullptr) return route;
    if (call.policy.whenNowhere() == RetryPolicy::Step::GiveUp) {
      throw ConnectionError("dlock: " + std::string(call.operation) + " " + quoteKey(call.key) + " on " +
                            topology.describe() + ": " + route.missing + call.policy.reason());
    }
    topology.awaitChange(route.version, call.policy.pause());
  }
}

// Carries out the policy's step after a failed try: false to give up.
bool retry(Topology& topology, Call& call, const Route& route, RetryPolicy::Step step) {
  if (step == RetryPolicy::Step::GiveUp) return false;
  if (step == RetryPolicy::Step::AfterPause) topology.awaitChange(route.version, call.policy.pause());
  return true;
}

// Sends `send(connection, route)` to the node the topology routes `slot` to, trying again where
// it says and as the call's policy decides; then returns `finish(connection, reply, route)`, run
// on the same connection before it goes back. An error reply not retried reaches `finish`, whose
// reader maps it; what `finish` throws is not retried.
template <class Send, class Finish>
auto run(Topology& topology, Call& call, std::uint16_t slot, Send&& send, Finish&& finish)
    -> decltype(finish(std::declval<Connection&>(), std::declval<const redisReply&>(), std::declval<const Route&>())) {
  std::optional<Route> via;
  while (true) {
    const Route route = nextRoute(topology, call, slot, via);
    Failure failure = Failure::NoConnection;
    std::string why;
    {
      std::optional<ConnectionPool::Handle> handle;
      try {
        handle.emplace(route.node->pool().borrow());
      } catch (const ConnectionError& error) {
        why = error.what();
      }
      if (handle) {
        ReplyPtr reply;
        try {
          reply = send(**handle, route);
        } catch (const ConnectionError& error) {
          failure = handle->reused() && (*handle)->broken() && !(*handle)->timedOut() ? Failure::Stale : Failure::Io;
          why = error.what();
        }
        if (reply) {
          if (reply->type != REDIS_REPLY_ERROR) return finish(**handle, *reply, route);
          if (isErrorReply(*reply, "DLOCKLATE")) {
            // Refused unrun (Scripts.h, makeBoundScript): the connection is sound, the call settled.
            throw LateCallError("dlock: " + std::string(call.operation) + " " + quoteKey(call.key) + " on " +
                                route.node->displayAddress() + ": " + std::string(replyText(*reply)));
          }
          Verdict verdict = topology.afterReply(route, replyText(*reply));
          const auto step = call.policy.afterReply(verdict.next, verdict.via && verdict.via->asking);
          call.note += verdict.note;
          if (step != RetryPolicy::Step::GiveUp) {
            handle.reset();  // back before the pause
            via = std::move(verdict.via);
            retry(topology, call, route, step);
            continue;
          }
          if (verdict.next == Next::Redirected) {
            throw ConnectionError("dlock: " + std::string(call.operation) + " " + quoteKey(call.key) + " on " +
                                  route.node->displayAddress() + call.policy.reason() + ", the last: " +
                                  std::string(replyText(*reply)));
          }
          try {
            return finish(**handle, *reply, route);
          } catch (const ServerUnavailableError& error) {
            if (call.note.empty() && call.policy.reason().empty()) throw;
            throw ConnectionError(error.what() + call.policy.reason() + call.note);
          }
        }
      }
    }  // the connection goes back (or, broken, away) before the topology looks again
    // A command still on its way (held on the path, queued at a paused server) cannot run after
    // this call gives up: its script refuses past the instant it carries (Scripts.h).
    const Verdict verdict = failure == Failure::Stale ? Verdict{} : topology.afterFailure(route, failure);
    call.note += verdict.note;
    if (retry(topology, call, route, call.policy.afterFailure(failure, verdict.next))) continue;
    throw ConnectionError(why + call.note);
  }
}

// The script call of a route: ASKING first after an ASK redirection.
ReplyPtr runOn(Connection& connection, const Route& route, const Script& script, const Argv& keys, const Argv& args) {
  return route.asking ? runScriptAsking(connection, script, keys, args) : runScript(connection, script, keys, args);
}

}  // namespace

RedisNode* subscribeOn(Topology& topology, milliseconds budget, std::uint16_t slot, const std::string& channel,
                       const std::function<void(const std::shared_ptr<Subscriber>&)>& take) {
  Call call("watch", channel, budget);
  call.policy.setSubscribing();
  std::optional<Route> via;
  while (true) {
    const Route route = nextRoute(topology, call, slot, via);
    RetryPolicy::Step step = RetryPolicy::Step::GiveUp;
    try {
      take(route.node->subscriber());
      return route.node;
    } catch (const ServerReplyError& error) {
      // Refused for this channel only; the subscriber asks again on the next watch().
      Verdict verdict = topology.afterReply(route, error.reply());
      step = call.policy.afterReply(verdict.next, verdict.via && verdict.via->asking);
      if (step == RetryPolicy::Step::GiveUp && !call.policy.reason().empty()) {
        throw ConnectionError("dlock: watch " + quoteKey(channel) + " on " + route.node->displayAddress() +
                              call.policy.reason() + ": " + error.reply());
      }
      if (step == RetryPolicy::Step::GiveUp) throw;
      via = std::move(verdict.via);
    } catch (const ConnectionError&) {
      step = call.policy.afterFailure(Failure::Io, topology.afterFailure(route, Failure::Io).next);
      if (step == RetryPolicy::Step::GiveUp) throw;
    }
    retry(topology, call, route, step);
  }
}

namespace {

// A confirmed subscription to a release channel, the node it is on and the node's subscriber it
// was made on (not kept alive: a retired subscriber stops, and wakes its watches).
struct Subscription {
  std::unique_ptr<IReleaseWatch> watch;
  RedisNode* node = nullptr;
  std::weak_ptr<Subscriber> subscriber;
};

Subscription subscribe(Topology& topology, milliseconds budget, std::uint16_t slot, const std::string& channel) {
  Subscription subscription;
  subscription.node = subscribeOn(topology, budget, slot, channel, [&](const std::shared_ptr<Subscriber>& subscriber) {
    subscription.watch = subscriber->watch(channel);
    subscription.subscriber = subscriber;
  });
  return subscription;
}

// A release watch that follows its key: once the topology no longer routes the key's slot to the
// node it listens on (a failover, a slot moved), or a cluster node dropped the channel (it handed
// the slot over), it subscribes where the slot lives now and reports a possible release, as one
// may have gone there unheard.
class FollowingWatch final : public IReleaseWatch {
 public:
  // `registration`: while the watch lives, the key's acquires register its listener (WaitingKeys).
  FollowingWatch(std::shared_ptr<Topology> topology, milliseconds budget, std::uint16_t slot, std::string channel,
                 Subscription subscription, std::unique_ptr<WaitingKeys::Registration> registration = nullptr)
      : topology_(std::move(topology)),
        budget_(budget),
        slot_(slot),
        channel_(std::move(channel)),
        current_(std::move(subscription)),
        registration_(std::move(registration)) {}

  bool waitForRelease(milliseconds timeout) override {
    if (listening()) {
      const bool woke = current_.watch->waitForRelease(timeout);
      // Woken by the node dropping the channel (it handed the slot over): subscribe where the slot
      // lives now before the waiter retries, or a release there between its retry and its next
      // wait would go unheard.
      if (!woke || listening()) return woke;
    }
    current_.watch.reset();
    try {
      current_ = subscribe(*topology_, budget_, slot_, channel_);
      if (heard_) (void)current_.watch->notifyOnRelease(heard_);
      rewatch_.reset();
    } catch (const LockError& error) {
      // The waiter's next attempt meets the same trouble and reports it; do not spin.
      logger()->debug("dlock: release watch on {} not moved yet: {}", topology_->describe(), error.what());
      (void)Wakeup::sleepFor(std::min(timeout, rewatch_.next()));
    }
    return true;
  }

  // Told by the node's watch, and by the one that replaces it. A move of the key's slot that no
  // message shows (a failover to a live replica) is found by the waiter's next poll or try.
  bool notifyOnRelease(std::function<void()> heard) override {
    if (heard_ || !heard || current_.watch == nullptr) return false;
    heard_ = std::move(heard);
    return current_.watch->notifyOnRelease(heard_);
  }

 private:
  [[nodiscard]] bool listening() const {
    if (current_.watch == nullptr || !topology_->serves(current_.node, slot_)) return false;
    // The node may have been left and come back to (A, B, A): its subscriber then is a new one.
    const auto subscriber = current_.subscriber.lock();
    if (subscriber == nullptr || subscriber != current_.node->subscriberIfAny()) return false;
    // Its own reconnects keep a subscriber listening; a cluster node drops a slot's channels.
    return !topology_->sharded() || subscriber->subscribed(channel_);
  }

  const std::shared_ptr<Topology> topology_;
  const milliseconds budget_;
  const std::uint16_t slot_;
  const std::string channel_;
  Subscription current_;
  std::function<void()> heard_;  // notifyOnRelease's, given to every node's watch in turn
  Backoff rewatch_{milliseconds(10), milliseconds(1000)};  // while the key's node cannot be subscribed to
  const std::unique_ptr<WaitingKeys::Registration> registration_;
};

// The release script's call for `token` (see ReleaseSource.cpp): its keys and arguments.
struct ReleaseCall {
  ReleaseCall(const KeyNames& names, std::string_view token, const RedisOperatorOptions& options, bool cancel = false)
      : channel(names.channel()),
        record(names.releaseRecord(token)),
        // The release's record outlives every retry of its call, and a caller's retry soon after.
        recordFloor(std::to_string((options.commandTimeout + options.retryBudget).count())),
        owner(names.owner()),
        waiters(names.waiters()),
        keys{names.lock()},
        args{token, channel, record, recordFloor, cancel ? "1" : "0", waiters, owner} {}  // the owner record last (Scripts.h)
  ReleaseCall(const ReleaseCall&) = delete;
  ReleaseCall& operator=(const ReleaseCall&) = delete;

  const std::string channel;
  const std::string record;
  const std::string recordFloor;
  const std::string owner;
  const std::string waiters;
  const Argv keys;
  const Argv args;
};

// Releases a key just acquired on `connection` (ReplicaWait.h's undo); says how that went.
std::string releaseAfterAcquire(Connection& connection, const KeyNames& names, bool sharded, std::string_view token,
                                const RedisOperatorOptions& options, const ReplySource& where) {
  const Script& script = sharded ? shardedReleaseScript() : releaseScript();
  const ReleaseCall release(names, token, options);
  const ReplyPtr reply = runScript(connection, script, release.keys, release.args);
  return releasedOrEnded(readReleaseReply(*reply, where));
}

}  // namespace

std::unique_ptr<IReleaseWatch> watchChannel(std::shared_ptr<Topology> topology, milliseconds budget, std::uint16_t slot,
                                            std::string channel) {
  Subscription subscription = subscribe(*topology, budget, slot, channel);
  return std::make_unique<FollowingWatch>(std::move(topology), budget, slot, std::move(channel),
                                          std::move(subscription));
}

void runScriptCall(Topology& topology, Call& call, std::uint16_t slot, const Script& script, const Argv& keys,
                   const Argv& args, const ScriptReader& read) {
  runScriptCallOn(topology, call, slot, script, keys, args,
                  [&](Connection&, const redisReply& reply, const std::string& node) { read(reply, node); });
}

void runScriptCallOn(Topology& topology, Call& call, std::uint16_t slot, const Script& script, const Argv& keys,
                     const Argv& args, const ConnectionReader& read) {
  run(
      topology, call, slot,
      [&](Connection& connection, const Route& route) { return runOn(connection, route, script, keys, args); },
      [&](Connection& connection, const redisReply& reply, const Route& route) {
        read(connection, reply, route.node->displayAddress());
      });
}


RenewalCalls exclusiveRenewalCalls(const RedisOperatorOptions& options, bool sharded,
                                   const std::vector<Renewal>& renewals, const std::vector<std::size_t>& members) {
  // As extendAll's: {lock keys...}, {ttl, tokens..., owner keys...} per kExtendChunk leases.
  RenewalCalls calls;
  for (std::size_t start = 0; start < members.size(); start += kExtendChunk) {
    const std::size_t end = std::min(members.size(), start + kExtendChunk);
    RenewalCall& call = calls.emplace_back();
    call.script = &extendManyScript();
    call.args.push_back(call.keep(std::to_string(renewals[members[start]].ttl.count())));
    Argv owners;
    for (std::size_t j = start; j < end; ++j) {
      const Renewal& renewal = renewals[members[j]];
      const KeyNames names(options.keyPrefix, renewal.key, sharded);
      call.keys.push_back(call.keep(names.lock()));
      call.args.push_back(renewal.token);
      owners.push_back(call.keep(names.owner()));
      call.members.push_back(members[j]);
    }
    call.args.insert(call.args.end(), owners.begin(), owners.end());
  }
  return calls;
}

}  // namespace detail

using namespace detail;

namespace {

std::uint64_t nextOperatorNumber() noexcept {
  static std::atomic<std::uint64_t> made{0};
  return made.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

struct RedisOperator::State {
  State(RedisOperatorOptions given, MakeTopology make)
      : options(std::move(given)),
        topology(std::move(make)),
        listenerSuffix("." + std::to_string(nextOperatorNumber())) {}

  // This operator's name in waiter registries: the process's listener (a forked child has its
  // own) and the operator's number, as each operator listens on its own subscribers.
  [[nodiscard]] std::string listener() const { return grantListener() + listenerSuffix; }

  const RedisOperatorOptions options;
  ForkLocal<Topology> topology;
  const std::string listenerSuffix;
  ForkLocal<WaitingKeys> waiting{[] { return std::make_shared<WaitingKeys>(); }};
};

RedisOperator::RedisOperator(const RedisOperatorOptions& options, MakeTopology makeTopology)
    : state_(std::make_unique<State>(options, std::move(makeTopology))) {}

RedisOperator::~RedisOperator() = default;

Topology& RedisOperator::topology() const { return *state_->topology; }

const std::shared_ptr<Topology>& RedisOperator::sharedTopology() const { return state_->topology.shared(); }

const RedisOperatorOptions& RedisOperator::operatorOptions() const { return state_->options; }

std::uint64_t RedisOperator::reconnects() const noexcept {
  try {
    return topology().reconnects();
  } catch (...) {  // a forked child could not set up its own state yet: none re-opened
    return 0;
  }
}

AcquireResult RedisOperator::lock(std::string_view key, std::string_view token, milliseconds ttl) {
  return acquire(key, token, ttl, nullptr);
}

AcquireResult RedisOperator::lockRecordingOwner(std::string_view key, std::string_view token, milliseconds ttl,
                                                std::string_view label) {
  checkOwnerLabel(label, "lock");
  return acquire(key, token, ttl, &label);
}

AcquireResult RedisOperator::acquire(std::string_view key, std::string_view token, milliseconds ttl,
                                     const std::string_view* label) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = state_->options;
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string fence = names.fence();
  const std::string ttlText = std::to_string(ttl.count());
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  const std::string record = names.releaseRecord(token);
  const std::string waiters = names.waiters();
  // Registered in the key's waiters only while a watch of this operator listens for the key; its
  // entry stays when another watch here still listens (two locks of one process on one key).
  const std::uint32_t watching = state_->waiting->count(key);
  const std::string listener = watching > 0 ? state_->listener() : std::string();
  Argv args{token, ttlText, fenceTtl, record, waiters, listener, kWaiterRegistrationMs, watching > 1 ? "1" : "0"};
  if (label != nullptr) args.push_back(*label);
  Call call("lock", key, options.retryBudget);
  return run(
      topology, call, names.slot(),
      [&](Connection& connection, const Route& route) {
        if (label == nullptr) return runOn(connection, route, acquireScript(), {names.lock(), fence}, args);
        return runOn(connection, route, acquireRecordingOwnerScript(), {names.lock(), fence, names.owner()}, args);
      },
      [&](Connection& connection, const redisReply& reply, const Route& route) {
        const ReplySource where("lock", key, route.node->displayAddress());
        const AcquireResult result = readAcquireReply(reply, where);
        if (result.acquired) {
          awaitReplicas(options, connection, where, [&](Connection& on) {
            return releaseAfterAcquire(on, names, topology.sharded(), token, options, where);
          });
        }
        return result;
      });
}

ReleaseResult RedisOperator::unlock(std::string_view key, std::string_view token) { return release(key, token, false); }

ReleaseResult RedisOperator::cancel(std::string_view key, std::string_view token) { return release(key, token, true); }

ReleaseResult RedisOperator::release(std::string_view key, std::string_view token, bool cancel) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = state_->options;
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const ReleaseCall release(names, token, options, cancel);
  const std::string& channel = release.channel;
  const Script& script = topology.sharded() ? shardedReleaseScript() : releaseScript();
  Call call(cancel ? "cancel" : "unlock", key, options.retryBudget);
  return run(
      topology, call, names.slot(),
      [&](Connection& connection, const Route& route) {
        return runOn(connection, route, script, release.keys, release.args);
      },
      [&](Connection&, const redisReply& reply, const Route& route) {
        // An error reply (READONLY, NOPERM...) means the script did not delete the key. A try
        // that was cut off and retried is decided by the script's record of it, never here.
        ReleaseResult result = readReleaseReply(reply, ReplySource("unlock", key, route.node->displayAddress()));
        // Our own subscriber is not a waiter of another process.
        const auto own = route.node->subscriberIfAny();
        if (result.notified > 0 && own != nullptr && own->subscribed(channel)) --result.notified;
        return result;
      });
}

bool RedisOperator::extend(std::string_view key, std::string_view token, milliseconds ttl) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = state_->options;
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string ttlText = std::to_string(ttl.count());
  const std::string owner = names.owner();
  Call call("extend", key, options.retryBudget);
  return run(
      topology, call, names.slot(),
      [&](Connection& connection, const Route& route) {
        return runOn(connection, route, extendScript(), {names.lock()}, {token, ttlText, owner});
      },
      [&](Connection& connection, const redisReply& reply, const Route& route) {
        const ReplySource where("extend", key, route.node->displayAddress());
        if (!readFlagReply(reply, where)) return false;
        requireRenewalReplicated(options, connection, where);
        return true;
      });
}

std::vector<ExtendResult> RedisOperator::extendAll(const std::vector<LeaseRef>& leases, milliseconds ttl) {
  // One pipeline per node, one extendMany per slot (a script's keys must share one on a cluster)
  // and per kExtendChunk leases: the watchdog's renewals cost one round trip per node however many
  // keys are held. Leases the batch cannot settle (a redirection, a "not now", a node that failed)
  // go through extend(), which follows the topology. Outcomes are per lease: a node that cannot
  // be reached makes only its own leases unknown.
  std::vector<ExtendResult> extended(leases.size());
  if (leases.empty()) return extended;
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = state_->options;
  const bool sharded = topology.sharded();
  const std::string ttlText = std::to_string(ttl.count());
  std::vector<std::string> lockKeys;
  std::vector<std::string> ownerKeys;
  std::vector<std::uint16_t> slots;
  lockKeys.reserve(leases.size());
  ownerKeys.reserve(leases.size());
  slots.reserve(leases.size());
  for (const auto& lease : leases) {
    const KeyNames names(options.keyPrefix, lease.key, sharded);
    lockKeys.push_back(names.lock());
    ownerKeys.push_back(names.owner());
    slots.push_back(sharded ? names.slot() : 0);
  }
  const std::vector<RedisNode*> owners = topology.owners(slots);
  // By node, then by slot: the leases of each extendMany.
  std::map<RedisNode*, std::map<std::uint16_t, std::vector<std::size_t>>> batches;
  std::vector<std::vector<std::size_t>> oneByOne(1);  // groups: a ConnectionError skips the rest of its group
  for (std::size_t i = 0; i < leases.size(); ++i) {
    if (owners[i] == nullptr) {
      oneByOne.front().push_back(i);
    } else {
      batches[owners[i]][slots[i]].push_back(i);
    }
  }
  for (const auto& [node, bySlot] : batches) {
    std::vector<std::pair<Argv, Argv>> calls;
    std::vector<std::vector<std::size_t>> members;  // the leases of each call
    for (const auto& [slot, indexes] : bySlot) {
      for (std::size_t start = 0; start < indexes.size(); start += kExtendChunk) {
        const std::size_t end = std::min(indexes.size(), start + kExtendChunk);
        Argv keys;
        Argv args = {ttlText};
        std::vector<std::size_t> chunk;
        for (std::size_t j = start; j < end; ++j) {
          keys.emplace_back(lockKeys[indexes[j]]);
          args.push_back(leases[indexes[j]].token);
          chunk.push_back(indexes[j]);
        }
        for (std::size_t j = start; j < end; ++j) args.emplace_back(ownerKeys[indexes[j]]);
        calls.emplace_back(std::move(keys), std::move(args));
        members.push_back(std::move(chunk));
      }
    }
    std::vector<ReplyPtr> replies;
    const std::string what = "(" + std::to_string(leases.size()) + " leases)";
    const ReplySource where("extend", what, node->displayAddress());
    bool replicated = true;
    try {
      replies = node->pool().run([&](Connection& connection) {
        std::vector<ReplyPtr> got = runScriptPipelined(connection, extendManyScript(), calls);
        replicated = renewalsReplicated(options, connection, where);
        return got;
      });
    } catch (const ConnectionError&) {
      // The node may have failed over: extend() follows the topology; a group stops at its first
      // ConnectionError rather than paying each lease's retry budget.
      std::vector<std::size_t> group;
      for (const auto& chunk : members) group.insert(group.end(), chunk.begin(), chunk.end());
      oneByOne.push_back(std::move(group));
      continue;
    }
    if (!replicated) {  // a lease this node still holds is not renewed until its replicas have it
      for (const auto& chunk : members) {
        for (const std::size_t i : chunk) extended[i].unknown = true;
      }
      continue;
    }
    for (std::size_t c = 0; c < replies.size(); ++c) {
      const redisReply& reply = *replies[c];
      if (reply.type == REDIS_REPLY_ERROR && topology.retryable(replyText(reply))) {
        oneByOne.push_back(members[c]);
        continue;
      }
      try {
        const std::vector<bool> flags = readFlagsReply(reply, members[c].size(), where);
        for (std::size_t j = 0; j < flags.size(); ++j) extended[members[c][j]].extended = flags[j];
      } catch (const LockError& error) {
        // A reply the batch cannot read says nothing of these leases, and nothing of the others.
        logger()->warn("dlock: renewing {} lease(s) on {}: {}", members[c].size(), node->displayAddress(),
                       error.what());
        for (const std::size_t i : members[c]) extended[i].unknown = true;
      }
    }
  }
  std::string cause;      // the last ConnectionError's text
  std::size_t cutOff = 0;  // the leases left unknown for want of a connection
  for (const auto& group : oneByOne) {
    bool unreachable = false;
    for (const std::size_t i : group) {
      if (unreachable) {
        extended[i].unknown = true;
        ++cutOff;
        continue;
      }
      try {
        extended[i].extended = extend(leases[i].key, leases[i].token, ttl);
      } catch (const ConnectionError& error) {
        unreachable = &group != &oneByOne.front();  // unrouted leases may each live elsewhere
        extended[i].unknown = true;
        cause = error.what();
        ++cutOff;
      } catch (const LockError&) {
        extended[i].unknown = true;
      }
    }
  }
  // Nothing settled, for want of a connection: the caller learns why (the watchdog's warning
  // names it), as from a call that threw at once; each lease is unknown either way.
  if (cutOff == leases.size()) throw ConnectionError(cause);
  return extended;
}

std::uint64_t RedisOperator::raiseFence(std::string_view key, std::uint64_t atLeast) {
  checkFencingToken(atLeast, "raiseFence");
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = state_->options;
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string fence = names.fence();
  const std::string wanted = std::to_string(atLeast);
  const std::string fenceTtl = std::to_string(options.fenceTtl.count());
  Call call("raiseFence", key, options.retryBudget);
  return run(
      topology, call, names.slot(),
      [&](Connection& connection, const Route& route) {
        return runOn(connection, route, raiseFenceScript(), {fence}, {wanted, fenceTtl});
      },
      [&](Connection&, const redisReply& reply, const Route& route) {
        return readFenceReply(reply, ReplySource("raiseFence", key, route.node->displayAddress()));
      });
}

std::unique_ptr<IReleaseWatch> RedisOperator::watch(std::string_view key) {
  const std::shared_ptr<Topology>& topology = state_->topology.shared();
  const RedisOperatorOptions& options = state_->options;
  const KeyNames names(options.keyPrefix, key, topology->sharded());
  // This operator's own wake-up channel, not the release channel every waiter of 0.2 hears: a
  // release wakes the one waiter it picks (Scripts.h). Registered before the subscription is
  // confirmed would do no harm either: the first registering try comes after this returns.
  std::string channel = names.channel() + ":" + state_->listener();
  Subscription subscription = subscribe(*topology, options.retryBudget, names.slot(), channel);
  return std::make_unique<FollowingWatch>(topology, options.retryBudget, names.slot(), std::move(channel),
                                          std::move(subscription), state_->waiting->add(key));
}

LeaseInfo RedisOperator::inspect(std::string_view key) {
  Topology& topology = this->topology();
  const RedisOperatorOptions& options = state_->options;
  const KeyNames names(options.keyPrefix, key, topology.sharded());
  const std::string fence = names.fence();
  const std::string owner = names.owner();
  Call call("inspect", key, options.retryBudget);
  return run(
      topology, call, names.slot(),
      [&](Connection& connection, const Route& route) {
        return runOn(connection, route, inspectScript(), {names.lock(), fence}, {owner});
      },
      [&](Connection&, const redisReply& reply, const Route& route) {
        return readInspectReply(reply, ReplySource("inspect", key, route.node->displayAddress()));
      });
}

std::string RedisOperator::describe() const { return topology().describe(); }

}  // namespace dlock
