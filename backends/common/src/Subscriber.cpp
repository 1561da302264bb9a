#include "Subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "Connection.h"
#include "Errors.h"
#include "ConnectionPool.h"
#include "Reply.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {

using Steady = std::chrono::steady_clock;

struct Subscriber::State {
  struct Channel {
    unsigned refs = 0;           // live watches
    bool requested = false;      // SUBSCRIBE sent (or queued) on the current connection
    bool confirmed = false;      // the server confirmed it
    bool unsubscribing = false;  // we sent UNSUBSCRIBE (linger ran out); its reply is ours
    std::string error;           // the server refused it (the reply's text)
    std::uint64_t releases = 0;  // messages received, and ends of the subscription its waiters must hear of
    Steady::time_point idleSince;
  };

  State(Target t, PoolOptions b, SubscriberOptions o)
      : target(std::move(t)), backoff(b), options(o), wakeFd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (wakeFd >= 0) ::close(wakeFd);
  }

  const Target target;
  const PoolOptions backoff;
  const SubscriberOptions options;
  const int wakeFd;

  mutable std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, Channel> channels;             // guarded by mutex
  std::vector<std::pair<bool, std::string>> pending;   // guarded by mutex; (subscribe?, channel)
  std::deque<std::string> unanswered;                  // guarded by mutex; SUBSCRIBEs sent, in order
  std::uint64_t generation = 0;                        // guarded by mutex; bumped per connection loss
  std::uint64_t connectFailures = 0;                   // guarded by mutex; failed connect attempts
  std::string address = "(not connected)";             // guarded by mutex
  std::string lastError;                               // guarded by mutex
  std::chrono::milliseconds confirmTimeout{std::chrono::seconds(2)};  // guarded by mutex
  bool stopping = false;                               // guarded by mutex
  bool dropRequested = false;                          // guarded by mutex
  bool started = false;                                // guarded by mutex
  std::thread thread;
  std::atomic<std::uint64_t> reconnects{0};

  const char* subscribeCommand() const { return options.sharded ? "SSUBSCRIBE" : "SUBSCRIBE"; }
  const char* unsubscribeCommand() const { return options.sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"; }

  void wake() const {
    const std::uint64_t one = 1;
    (void)!::write(wakeFd, &one, sizeof one);
  }

  void run();
  std::unique_ptr<Connection> connect(unsigned& failures, bool& everConnected);
  void serve(Connection& connection);
  void handle(const redisReply& reply, std::optional<Steady::time_point>& pingSentAt);
  void onConnectionLost(const std::string& why);
};

namespace {

class SubscriberWatch final : public IReleaseWatch {
 public:
  SubscriberWatch(std::shared_ptr<Subscriber::State> state, std::string channel, std::uint64_t seen,
                  std::uint64_t generation)
      : state_(std::move(state)), channel_(std::move(channel)), seen_(seen), generation_(generation) {}
  SubscriberWatch(const SubscriberWatch&) = delete;
  SubscriberWatch& operator=(const SubscriberWatch&) = delete;

  ~SubscriberWatch() override {
    std::lock_guard<std::mutex> guard(state_->mutex);
    auto& channel = state_->channels[channel_];
    if (channel.refs > 0 && --channel.refs == 0) channel.idleSince = Steady::now();
  }

  bool waitForRelease(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> guard(state_->mutex);
    const auto& channel = state_->channels[channel_];
    // A lost connection counts as a release (one may have been missed), but only once the
    // channel is confirmed on the new connection: a retry before that misses a release published
    // between the retry and the new SUBSCRIBE. A failed reconnect wakes the waiter too, so that
    // its retry reports the trouble (or finds where the key lives now) instead of sleeping out its
    // bound; generation_ stays behind until the confirmation, which then wakes it again.
    const std::uint64_t failuresBefore = state_->connectFailures;
    const bool woke = state_->changed.wait_for(guard, timeout, [&] {
      return channel.releases != seen_ || state_->stopping ||
             (state_->generation != generation_ &&
              (channel.confirmed || state_->connectFailures != failuresBefore));
    });
    seen_ = channel.releases;
    if (channel.confirmed) generation_ = state_->generation;  // confirmed flags reset at every loss
    return woke;
  }

 private:
  const std::shared_ptr<Subscriber::State> state_;
  const std::string channel_;
  std::uint64_t seen_;
  std::uint64_t generation_;
};

}  // namespace

Subscriber::Subscriber(Target target, PoolOptions backoff, SubscriberOptions options)
    : state_(std::make_shared<State>(std::move(target), backoff, options)) {
  if (state_->wakeFd < 0) throw LockError("dlock: eventfd failed for the release subscriber");
}

Subscriber::~Subscriber() {
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->stopping = true;
  }
  state_->wake();
  state_->changed.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

std::unique_ptr<IReleaseWatch> Subscriber::watch(const std::string& name) {
  std::unique_lock<std::mutex> guard(state_->mutex);
  if (!state_->started) {
    state_->started = true;
    state_->thread = std::thread([state = state_.get()] { state->run(); });
  }
  auto& channel = state_->channels[name];
  ++channel.refs;
  if (!channel.requested) {
    channel.requested = true;
    channel.error.clear();
    state_->pending.emplace_back(true, name);
    state_->wake();
  }
  // Wait for the confirmation, but not past a failed connect: a dead server fails fast.
  const auto deadline = Steady::now() + state_->confirmTimeout;
  const std::uint64_t failuresBefore = state_->connectFailures;
  state_->changed.wait_until(guard, deadline, [&] {
    return channel.confirmed || !channel.error.empty() || state_->stopping ||
           state_->connectFailures != failuresBefore;
  });
  if (!channel.confirmed) {
    if (--channel.refs == 0) channel.idleSince = Steady::now();
    // A refusal keeps its type: "not now" (TRYAGAIN, LOADING, ...) is a ConnectionError.
    if (!channel.error.empty()) {
      throwErrorText(channel.error, std::string(state_->subscribeCommand()) + " " + name + " on " + state_->address);
    }
    throw ConnectionError("dlock: subscribing to release messages on " + state_->address + ": " +
                          (state_->lastError.empty() ? "no confirmation in time" : state_->lastError));
  }
  return std::make_unique<SubscriberWatch>(state_, name, channel.releases, state_->generation);
}

bool Subscriber::subscribed(const std::string& name) const {
  std::lock_guard<std::mutex> guard(state_->mutex);
  const auto it = state_->channels.find(name);
  return it != state_->channels.end() && it->second.confirmed;
}

void Subscriber::reconnect() {
  {
    std::lock_guard<std::mutex> guard(state_->mutex);
    state_->dropRequested = true;
  }
  state_->wake();
}

std::uint64_t Subscriber::reconnects() const noexcept { return state_->reconnects.load(std::memory_order_relaxed); }

std::unique_ptr<Connection> Subscriber::State::connect(unsigned& failures, bool& everConnected) {
  try {
    const ConnectionOptions where = target();
    {
      std::lock_guard<std::mutex> guard(mutex);
      address = where.address();
      confirmTimeout = where.connectTimeout + where.commandTimeout;
    }
    auto connection = std::make_unique<Connection>(where);
    std::lock_guard<std::mutex> guard(mutex);
    if (everConnected) {
      reconnects.fetch_add(1, std::memory_order_relaxed);
      logger()->warn("dlock: release subscriber reconnected to {}", address);
    }
    everConnected = true;
    failures = 0;
    lastError.clear();
    dropRequested = false;
    // Subscribe again to everything still watched; forget channels nobody watches.
    pending.clear();
    unanswered.clear();
    for (auto it = channels.begin(); it != channels.end();) {
      if (it->second.refs == 0) {
        it = channels.erase(it);
        continue;
      }
      it->second.requested = true;
      it->second.confirmed = false;
      it->second.unsubscribing = false;
      pending.emplace_back(true, it->first);
      ++it;
    }
    return connection;
  } catch (const std::exception& error) {
    std::unique_lock<std::mutex> guard(mutex);
    lastError = error.what();
    ++failures;
    ++connectFailures;
    changed.notify_all();  // let watch() callers see the failure instead of waiting it out
    changed.wait_for(guard, reconnectDelay(backoff, failures), [&] { return stopping; });
    return nullptr;
  }
}

void Subscriber::State::run() {
  unsigned failures = 0;
  bool everConnected = false;
  while (true) {
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (stopping) return;
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

void Subscriber::State::onConnectionLost(const std::string& why) {
  std::lock_guard<std::mutex> guard(mutex);
  if (!stopping) logger()->warn("dlock: release subscriber lost {}: {}", address, why);
  lastError = why;
  ++generation;
  for (auto& [name, channel] : channels) {
    channel.requested = false;
    channel.confirmed = false;
  }
  changed.notify_all();
}

void Subscriber::State::serve(Connection& connection) {
  Steady::time_point lastActivity = Steady::now();
  std::optional<Steady::time_point> pingSentAt;
  std::chrono::milliseconds commandTimeout;
  {
    std::lock_guard<std::mutex> guard(mutex);
    commandTimeout = confirmTimeout;
  }
  while (true) {
    std::vector<std::pair<bool, std::string>> toSend;
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (stopping) return;
      if (dropRequested) {
        dropRequested = false;
        throw ConnectionError("reconnect requested");
      }
      // Unsubscribe channels idle for longer than the linger time.
      const auto now = Steady::now();
      for (auto& [name, channel] : channels) {
        if (channel.refs == 0 && channel.confirmed && now - channel.idleSince >= options.linger) {
          channel.requested = false;
          channel.confirmed = false;
          channel.unsubscribing = true;
          pending.emplace_back(false, name);
        }
      }
      toSend.swap(pending);
      for (const auto& [subscribe, name] : toSend) {
        if (subscribe) unanswered.push_back(name);
      }
    }
    for (const auto& [subscribe, name] : toSend) {
      connection.append({subscribe ? subscribeCommand() : unsubscribeCommand(), name});
    }
    if (!toSend.empty()) connection.flushWrites();

    while (ReplyPtr reply = connection.takeBufferedReply()) {
      handle(*reply, pingSentAt);
      lastActivity = Steady::now();
    }

    const auto now = Steady::now();
    if (pingSentAt && now - *pingSentAt > commandTimeout) throw ConnectionError("no PING reply in time");
    if (!pingSentAt && now - lastActivity >= options.pingInterval) {
      connection.append({"PING"});
      connection.flushWrites();
      pingSentAt = now;
    }
    const auto nextCheck = pingSentAt ? *pingSentAt + commandTimeout : lastActivity + options.pingInterval;
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(nextCheck - now);
    const int timeoutMs = static_cast<int>(std::clamp<long long>(wait.count() + 1, 1, 1000));

    pollfd fds[2] = {{connection.fd(), POLLIN, 0}, {wakeFd, POLLIN, 0}};
    const int ready = ::poll(fds, 2, timeoutMs);
    if (ready < 0 && errno != EINTR) throw ConnectionError("poll failed");
    if (ready <= 0) continue;
    if ((fds[1].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      (void)!::read(wakeFd, &count, sizeof count);
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) connection.readAvailable();
  }
}

void Subscriber::State::handle(const redisReply& reply, std::optional<Steady::time_point>& pingSentAt) {
  if (reply.type == REDIS_REPLY_ERROR) {
    // Replies come in order: an error answers the oldest SUBSCRIBE not yet answered. That channel
    // alone is refused, and no longer requested, so a later watch() asks again.
    std::lock_guard<std::mutex> guard(mutex);
    if (unanswered.empty()) return;
    const auto it = channels.find(unanswered.front());
    unanswered.pop_front();
    if (it == channels.end()) return;
    it->second.error = std::string(replyText(reply));
    it->second.requested = false;
    // Refused again after a reconnect, the channel's waiters would hear nothing more: wake
    // them as a release would (as for a channel the server drops).
    ++it->second.releases;
    changed.notify_all();
    return;
  }
  // PING answers ["pong", ""] on a connection with subscriptions, but +PONG on one without
  // (every channel lingered out, or none was ever confirmed).
  if (reply.type == REDIS_REPLY_STATUS && replyText(reply) == "PONG") {
    pingSentAt.reset();
    return;
  }
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements < 1 || reply.element[0]->type != REDIS_REPLY_STRING) return;
  const std::string_view kind = replyText(*reply.element[0]);
  if (kind == "pong") {
    pingSentAt.reset();
    return;
  }
  if (reply.elements < 2 || reply.element[1]->type != REDIS_REPLY_STRING) return;
  const std::string name(replyText(*reply.element[1]));
  const bool message = kind == "message" || kind == "smessage";
  const bool subscribed = kind == "subscribe" || kind == "ssubscribe";
  {
    std::lock_guard<std::mutex> guard(mutex);
    const auto it = channels.find(name);
    if (it == channels.end()) return;
    auto& channel = it->second;
    if (message) {
      ++channel.releases;
    } else if (subscribed) {
      const auto sent = std::find(unanswered.begin(), unanswered.end(), name);
      if (sent != unanswered.end()) unanswered.erase(sent);
      if (channel.requested) channel.confirmed = true;
    } else if (kind == "unsubscribe" || kind == "sunsubscribe") {
      if (channel.unsubscribing) {
        channel.unsubscribing = false;
        if (channel.refs == 0 && !channel.requested) channels.erase(it);
      } else {
        // The server dropped it (a cluster slot moved away): its waiters would hear nothing more,
        // so wake them as a release would; their retry finds where the key lives now.
        channel.confirmed = false;
        channel.requested = false;
        ++channel.releases;
      }
    } else {
      return;
    }
    changed.notify_all();
  }
  // Callbacks run on this thread, without the lock: they may call back into the subscriber.
  if (message && options.onMessage) options.onMessage(name, replyText(*reply.element[reply.elements - 1]));
  if (subscribed && options.onSubscribed) options.onSubscribed(name);
}

}  // namespace dlock::detail
