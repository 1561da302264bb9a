// SPDX-License-Identifier: Apache-2.0
#include "GrantWatch.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "QueueReplies.h"
#include "RedisNode.h"
#include "ScriptCall.h"
#include "Subscriber.h"
#include "Topology.h"
#include "dlock/LockError.h"
#include "dlock/Validation.h"
#include "dlock/detail/Fork.h"
#include "dlock/detail/Log.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {
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

}  // namespace

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

namespace {

// `token|fence|now-ms|claim-ms`, the token already matched by the subscription.
Grant readGrant(std::string_view payload, std::uint64_t minFence) {
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
  if (count != 4 || !parseDecimal(fields[1], kMaxFencingToken, fence) || fence < minFence ||
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
                      std::string token, std::uint64_t minFence, GrantSubscription subscription)
      : topology_(std::move(topology)),
        budget_(budget),
        slot_(slot),
        channel_(std::move(channel)),
        token_(std::move(token)),
        minFence_(minFence),
        current_(std::move(subscription)) {}

  Grant waitForGrant(milliseconds timeout) override {
    if (current_.watch != nullptr && topology_->serves(current_.node, slot_)) {
      MessageWait heard = current_.watch->waitForMessage(timeout);
      if (heard.outcome == MessageWait::Outcome::Message) return readGrant(heard.payload, minFence_);
      if (heard.outcome == MessageWait::Outcome::TimedOut) return Grant{};
      // A possible miss: subscribe again (at once when the channel is still confirmed), as the
      // subscription may be gone for good (a dropped subscriber, a channel the node let go).
    }
    current_.watch.reset();
    try {
      current_ = subscribeGrants(*topology_, budget_, slot_, channel_, token_);
      if (heard_) (void)current_.watch->notifyOnMessage(heard_);
    } catch (const LockError& error) {
      logger()->debug("dlock: hand-off watch on {} not moved yet: {}", topology_->describe(), error.what());
      (void)Wakeup::sleepFor(std::min(timeout, kRewatchPause));
    }
    return Grant{Grant::Kind::Recheck, 0, 0};
  }

  // Told by the node's subscription, and by the one that replaces it (as FollowingWatch).
  bool notifyOnGrant(std::function<void()> heard) override {
    if (heard_ || !heard || current_.watch == nullptr) return false;
    heard_ = std::move(heard);
    return current_.watch->notifyOnMessage(heard_);
  }

 private:
  const std::shared_ptr<Topology> topology_;
  const milliseconds budget_;
  const std::uint16_t slot_;
  const std::string channel_;
  const std::string token_;
  const std::uint64_t minFence_;
  GrantSubscription current_;
  std::function<void()> heard_;  // notifyOnGrant's, given to every node's subscription in turn
};

}  // namespace

std::unique_ptr<IGrantWatch> watchGrantChannel(const std::shared_ptr<Topology>& topology, milliseconds budget,
                                               std::uint16_t slot, std::string channel, std::string token,
                                               std::uint64_t minFence) {
  GrantSubscription subscription = subscribeGrants(*topology, budget, slot, channel, token);
  return std::make_unique<FollowingGrantWatch>(topology, budget, slot, std::move(channel), std::move(token), minFence,
                                               std::move(subscription));
}

}  // namespace dlock::detail
