// SPDX-License-Identifier: Apache-2.0
#include "PubSubConnection.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "Connection.h"
#include "ConnectionPool.h"
#include "Errors.h"
#include "dlock/LockError.h"
#include "dlock/detail/CallBudget.h"
#include "dlock/detail/Log.h"
#include "dlock/detail/Wakeup.h"

namespace dlock::detail {

class PubSubConnection::Watch final : public IReleaseWatch {
 public:
  Watch(std::shared_ptr<PubSubConnection> connection, std::string channel, std::uint64_t seen,
        std::uint64_t generation)
      : connection_(std::move(connection)), channel_(std::move(channel)), seen_(seen), generation_(generation) {}
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  ~Watch() override {
    std::lock_guard<std::mutex> guard(connection_->mutex_);
    auto& channel = connection_->channels_[channel_];
    auto& notified = channel.notified;
    notified.erase(std::remove(notified.begin(), notified.end(), &heard_), notified.end());
    if (channel.watchers > 0 && --channel.watchers == 0) channel.idleSince = Steady::now();
  }

  // Told on the connection's thread, its mutex held, whenever the channel's watchers are woken.
  bool notifyOnRelease(std::function<void()> heard) override {
    std::lock_guard<std::mutex> guard(connection_->mutex_);
    if (heard_ || !heard) return false;
    heard_ = std::move(heard);
    connection_->channels_[channel_].notified.push_back(&heard_);
    return true;
  }

  bool waitForRelease(std::chrono::milliseconds timeout) override {
    PubSubConnection& c = *connection_;
    std::unique_lock<std::mutex> guard(c.mutex_);
    Channel& channel = c.channels_[channel_];  // kept in the table while watched
    // A lost connection counts as a release (one may have been missed), but only once the
    // channel is confirmed on the new connection: a retry before that misses a release published
    // between the retry and the new SUBSCRIBE. A failed reconnect wakes the waiter too, so that
    // its retry reports the trouble (or finds where the key lives now) instead of sleeping out its
    // bound; generation_ stays behind until the confirmation, which then wakes it again.
    const std::uint64_t failuresBefore = c.connectFailures_;
    const bool woke = Wakeup::waitFor(channel.changed, guard, timeout, [&] {
      return channel.events != seen_ || c.stopping_ ||
             (c.generation_ != generation_ && (channel.confirmed || c.connectFailures_ != failuresBefore));
    });
    seen_ = channel.events;
    if (channel.confirmed) generation_ = c.generation_;  // confirmed flags reset at every loss
    return woke;
  }

 private:
  const std::shared_ptr<PubSubConnection> connection_;
  const std::string channel_;
  std::uint64_t seen_;
  std::uint64_t generation_;
  std::function<void()> heard_;  // guarded by the connection's mutex_
};

// A Watch that reports the messages for one prefix only, so a fair waiter is woken by its own
// hand-off, not by every other waiter's. It keeps a Watch, which keeps the channel subscribed.
class PubSubConnection::PrefixWatch final : public IMessageWatch {
 public:
  PrefixWatch(std::unique_ptr<IReleaseWatch> watch, std::shared_ptr<PubSubConnection> connection, std::string channel,
              std::string prefix, std::uint64_t drops, std::uint64_t generation)
      : watch_(std::move(watch)),
        connection_(std::move(connection)),
        channel_(std::move(channel)),
        prefix_(std::move(prefix)),
        drops_(drops),
        generation_(generation) {}
  PrefixWatch(const PrefixWatch&) = delete;
  PrefixWatch& operator=(const PrefixWatch&) = delete;

  ~PrefixWatch() override {
    std::lock_guard<std::mutex> guard(connection_->mutex_);
    connection_->channels_[channel_].wanted.erase(prefix_);
  }

  MessageWait waitForMessage(std::chrono::milliseconds timeout) override {
    PubSubConnection& c = *connection_;
    std::unique_lock<std::mutex> guard(c.mutex_);
    Channel& channel = c.channels_[channel_];  // kept in the table while watched
    Wanted& slot = channel.wanted[prefix_];  // kept while this watch lives
    std::string& message = slot.message;
    // As Watch::waitForRelease: a lost connection counts once the channel is confirmed again.
    const std::uint64_t failuresBefore = c.connectFailures_;
    const auto missed = [&] {
      return channel.drops != drops_ || c.stopping_ ||
             (c.generation_ != generation_ && (channel.confirmed || c.connectFailures_ != failuresBefore));
    };
    Wakeup::waitFor(slot.arrived, guard, timeout, [&] { return !message.empty() || missed(); });
    MessageWait result;
    if (!message.empty()) {
      result.outcome = MessageWait::Outcome::Message;
      result.payload.swap(message);
    } else if (missed()) {
      result.outcome = MessageWait::Outcome::MaybeMissed;
    }
    drops_ = channel.drops;
    if (channel.confirmed) generation_ = c.generation_;
    return result;
  }

  bool notifyOnMessage(std::function<void()> heard) override {
    std::lock_guard<std::mutex> guard(connection_->mutex_);
    Wanted& slot = connection_->channels_[channel_].wanted[prefix_];
    if (slot.heard || !heard) return false;
    slot.heard = std::move(heard);
    return true;
  }

 private:
  const std::unique_ptr<IReleaseWatch> watch_;
  const std::shared_ptr<PubSubConnection> connection_;
  const std::string channel_;
  const std::string prefix_;
  std::uint64_t drops_;
  std::uint64_t generation_;
};

PubSubConnection::PubSubConnection(Target target, PoolOptions backoff, Options options)
    : target_(std::move(target)),
      backoff_(backoff),
      options_(std::move(options)),
      wakeFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wakeFd_ < 0) throw LockError("dlock: eventfd failed for the " + options_.role);
}

PubSubConnection::~PubSubConnection() {
  stop();
  ::close(wakeFd_);
}

void PubSubConnection::stop() {
  std::thread thread;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    thread.swap(thread_);
    notifyAll();
  }
  wake();
  if (thread.joinable()) thread.join();
}

void PubSubConnection::requestStop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
    notifyAll();
  }
  wake();
}

void PubSubConnection::notifyAll() {
  for (auto& [name, channel] : channels_) channel.wakeAll();
  changed_.notify_all();
}

void PubSubConnection::wake() const {
  const std::uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof one);
}

void PubSubConnection::startLocked() {
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { run(); });
}

std::unique_ptr<IReleaseWatch> PubSubConnection::watch(const std::string& name) {
  std::unique_lock<std::mutex> guard(mutex_);
  startLocked();
  auto& channel = channels_[name];
  ++channel.watchers;
  if (!channel.requested) {
    channel.requested = true;
    channel.error.clear();
    pending_.emplace_back(true, name);
    wake();
  }
  // Wait for the confirmation, but not past a failed connect: a dead server fails fast.
  const auto deadline = Steady::now() + CallBudget::cap(confirmTimeout_);
  const std::uint64_t failuresBefore = connectFailures_;
  channel.changed.wait_until(guard, deadline, [&] {
    return channel.confirmed || !channel.error.empty() || stopping_ || connectFailures_ != failuresBefore;
  });
  if (!channel.confirmed) {
    if (--channel.watchers == 0) channel.idleSince = Steady::now();
    // A refusal keeps its type: "not now" (TRYAGAIN, LOADING, ...) is a ConnectionError.
    if (!channel.error.empty()) {
      throwErrorText(channel.error, std::string(subscribeCommand()) + " " + name + " on " + address_);
    }
    throw ConnectionError("dlock: " + options_.role + " subscribing on " + address_ + ": " +
                          (lastError_.empty() ? "no confirmation in time" : lastError_));
  }
  return std::make_unique<Watch>(shared_from_this(), name, channel.events, generation_);
}

std::unique_ptr<IMessageWatch> PubSubConnection::watchFor(const std::string& name, const std::string& prefix) {
  std::unique_ptr<IReleaseWatch> watch = this->watch(name);
  // Registered after the confirmation: a caller checks again after this returns, so a message
  // before it is found by that check.
  std::lock_guard<std::mutex> guard(mutex_);
  auto& channel = channels_[name];
  channel.wanted[prefix].message.clear();
  return std::make_unique<PrefixWatch>(std::move(watch), shared_from_this(), name, prefix, channel.drops, generation_);
}

void PubSubConnection::listen(Listener listener) {
  std::sort(listener.channels.begin(), listener.channels.end());  // each counted once in onSubscribed
  listener.channels.erase(std::unique(listener.channels.begin(), listener.channels.end()), listener.channels.end());
  std::lock_guard<std::mutex> guard(mutex_);
  if (stopping_) return;
  listeners_.push_back(std::make_unique<const Listener>(std::move(listener)));
  for (const auto& name : listeners_.back()->channels) channels_[name].listeners.push_back(listeners_.back().get());
  requestListened();
  startLocked();
  wake();
}

bool PubSubConnection::subscribed(const std::string& name) const {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto it = channels_.find(name);
  return it != channels_.end() && it->second.confirmed;
}

void PubSubConnection::reconnect() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    dropRequested_ = true;
  }
  wake();
}

void PubSubConnection::requestListened() {
  for (auto& [name, channel] : channels_) {
    if (channel.listeners.empty() || channel.requested) continue;
    channel.requested = true;
    channel.error.clear();
    pending_.emplace_back(true, name);
  }
}

void PubSubConnection::run() {
  unsigned failures = 0;
  bool everConnected = false;
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_) return;
    }
    std::unique_ptr<Connection> connection = connect(failures, everConnected);
    if (!connection) continue;
    try {
      serve(*connection);
      return;  // stopping
    } catch (const std::exception& error) {
      onConnectionLost(error.what());
    }
  }
}

std::unique_ptr<Connection> PubSubConnection::connect(unsigned& failures, bool& everConnected) {
  try {
    const ConnectionOptions where = target_();
    {
      std::lock_guard<std::mutex> guard(mutex_);
      address_ = where.address();
      confirmTimeout_ = where.connectTimeout + where.commandTimeout;
    }
    auto connection = std::make_unique<Connection>(where);
    std::lock_guard<std::mutex> guard(mutex_);
    if (everConnected) {
      reconnects_.fetch_add(1, std::memory_order_relaxed);
      logger()->warn("dlock: {} reconnected to {}", options_.role, address_);
    }
    everConnected = true;
    failures = 0;
    lastError_.clear();
    dropRequested_ = false;
    // Subscribe again to every channel with clients; forget the others.
    pending_.clear();
    unanswered_.clear();
    for (auto it = channels_.begin(); it != channels_.end();) {
      auto& channel = it->second;
      if (channel.watchers == 0 && channel.listeners.empty()) {
        it = channels_.erase(it);
        continue;
      }
      channel.requested = true;
      channel.confirmed = false;
      channel.unsubscribing = false;
      channel.error.clear();  // a refusal on an earlier connection is not this one's answer
      pending_.emplace_back(true, it->first);
      ++it;
    }
    return connection;
  } catch (const std::exception& error) {
    std::unique_lock<std::mutex> guard(mutex_);
    logger()->debug("dlock: {} cannot reach {}: {}", options_.role, address_, error.what());
    lastError_ = error.what();
    ++failures;
    ++connectFailures_;
    notifyAll();  // let watch() callers see the failure instead of waiting it out
    changed_.wait_for(guard, reconnectDelay(backoff_, failures), [&] { return stopping_; });
    return nullptr;
  }
}

void PubSubConnection::onConnectionLost(const std::string& why) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (!stopping_) logger()->warn("dlock: {} lost {}: {}", options_.role, address_, why);
  lastError_ = why;
  ++generation_;
  for (auto& [name, channel] : channels_) {
    channel.requested = false;
    channel.confirmed = false;
  }
  notifyAll();
}

void PubSubConnection::serve(Connection& connection) {
  Steady::time_point lastActivity = Steady::now();
  // A PING awaits its reply while `awaitingPong` (a plain pair: GCC's -Wmaybe-uninitialized
  // misfires on an optional time_point here).
  bool awaitingPong = false;
  Steady::time_point pingSentAt{};
  std::chrono::milliseconds replyTimeout;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    replyTimeout = confirmTimeout_;
  }
  while (true) {
    while (ReplyPtr reply = connection.takeBufferedReply()) {
      Calls calls;
      if (handle(*reply, calls)) awaitingPong = false;
      // Handlers run without the lock: they may call back into this object.
      for (const Listener* listener : calls.message) {
        if (listener->onMessage) listener->onMessage(calls.channel, calls.payload);
      }
      for (const Listener* listener : calls.subscribed) {
        if (listener->onSubscribed) listener->onSubscribed();
      }
      // A handler may have taken a while: count from now, not from before it.
      lastActivity = Steady::now();
      if (awaitingPong) pingSentAt = lastActivity;
    }

    std::vector<std::pair<bool, std::string>> toSend;
    const auto now = Steady::now();
    const bool pingDue = !awaitingPong && now - lastActivity >= options_.pingInterval;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      if (stopping_) return;
      if (dropRequested_) {
        dropRequested_ = false;
        throw ConnectionError("reconnect requested");
      }
      // Unsubscribe channels nobody has watched for the linger time.
      for (auto& [name, channel] : channels_) {
        if (channel.watchers == 0 && channel.listeners.empty() && channel.confirmed &&
            now - channel.idleSince >= options_.linger) {
          channel.requested = false;
          channel.confirmed = false;
          channel.unsubscribing = true;
          pending_.emplace_back(false, name);
        }
      }
      if (pingDue) requestListened();  // a refused or dropped one, at most once per PING interval
      toSend.swap(pending_);
      for (const auto& [subscribe, name] : toSend) {
        if (subscribe) unanswered_.push_back(name);
      }
    }
    for (const auto& [subscribe, name] : toSend) {
      connection.append({subscribe ? subscribeCommand() : unsubscribeCommand(), name});
    }
    if (pingDue) {
      connection.append({"PING"});
      awaitingPong = true;
      pingSentAt = now;
    }
    if (!toSend.empty() || pingDue) connection.flushWrites();

    if (awaitingPong && now - pingSentAt > replyTimeout) throw ConnectionError("no PING reply in time");
    const auto nextCheck = awaitingPong ? pingSentAt + replyTimeout : lastActivity + options_.pingInterval;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(nextCheck - now);
    const int timeoutMs = static_cast<int>(std::clamp<long long>(wait.count() + 1, 1, 1000));

    pollfd fds[2] = {{connection.fd(), POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, timeoutMs);
    if (ready < 0 && errno != EINTR) throw ConnectionError("poll failed");
    if (ready <= 0) continue;
    if ((fds[1].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      (void)!::read(wakeFd_, &count, sizeof count);
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) connection.readAvailable();
  }
}

bool PubSubConnection::handle(const redisReply& reply, Calls& calls) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (reply.type == REDIS_REPLY_ERROR) {
    // Replies come in order: an error answers the oldest SUBSCRIBE not yet answered. That channel
    // alone is refused, and no longer requested, so a later client asks again.
    if (unanswered_.empty()) return false;
    const auto it = channels_.find(unanswered_.front());
    unanswered_.pop_front();
    if (it == channels_.end()) return false;
    auto& channel = it->second;
    channel.error = std::string(replyText(reply));
    channel.requested = false;
    if (!channel.listeners.empty()) {
      logger()->warn("dlock: {} {}: {} {} refused: {}", options_.role, address_, subscribeCommand(), it->first,
                     channel.error);
    }
    // Refused again after a reconnect, the channel's watchers would hear nothing more: wake
    // them as a release would (as for a channel the server drops).
    ++channel.events;
    channel.wakeAll();
    return false;
  }
  // PING answers ["pong", ""] on a connection with subscriptions, but +PONG on one without
  // (every channel lingered out, or none was ever confirmed).
  if (reply.type == REDIS_REPLY_STATUS && replyText(reply) == "PONG") return true;
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 1 || reply.element[0]->type != REDIS_REPLY_STRING) {
    return false;
  }
  const std::string_view kind = replyText(*reply.element[0]);
  if (kind == "pong") return true;
  if (reply.elements < 2 || reply.element[1]->type != REDIS_REPLY_STRING) return false;
  const std::string name(replyText(*reply.element[1]));
  const auto it = channels_.find(name);
  if (it == channels_.end()) return false;
  auto& channel = it->second;
  if (kind == "message" || kind == "smessage") {
    ++channel.events;
    calls.message = channel.listeners;
    calls.channel = name;
    calls.payload = replyText(*reply.element[reply.elements - 1]);
    if (!channel.wanted.empty()) {
      const auto wanted = channel.wanted.find(std::string(calls.payload.substr(0, calls.payload.find('|'))));
      if (wanted != channel.wanted.end()) {
        wanted->second.message.assign(calls.payload);
        wanted->second.wake();
      }
    }
    channel.wakeWatchers();  // release watchers; a PrefixWatch hears only its own prefix
    return false;
  }
  if (kind == "subscribe" || kind == "ssubscribe") {
    const auto sent = std::find(unanswered_.begin(), unanswered_.end(), name);
    if (sent != unanswered_.end()) unanswered_.erase(sent);
    if (!channel.requested) return false;
    channel.confirmed = true;
    for (const Listener* listener : channel.listeners) {
      const bool all = std::all_of(listener->channels.begin(), listener->channels.end(),
                                   [&](const std::string& other) { return channels_.at(other).confirmed; });
      if (all) calls.subscribed.push_back(listener);
    }
  } else if (kind == "unsubscribe" || kind == "sunsubscribe") {
    if (channel.unsubscribing) {
      channel.unsubscribing = false;
      if (channel.watchers == 0 && channel.listeners.empty() && !channel.requested) {
        channels_.erase(it);  // nobody waits on it
        return false;
      }
    } else {
      // The server dropped it (a cluster slot moved away): its watchers would hear nothing more,
      // so wake them as a release would; their retry finds where the key lives now.
      channel.confirmed = false;
      channel.requested = false;
      ++channel.events;
      ++channel.drops;
    }
  } else {
    return false;
  }
  channel.wakeAll();
  return false;
}

}  // namespace dlock::detail
