#include "SentinelEvents.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "Connection.h"
#include "Errors.h"
#include "Reply.h"
#include "dlock/LockError.h"
#include "dlock/detail/Log.h"

namespace dlock::detail {
namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kPingInterval{1000};

struct Channel {
  const char* name;
  SentinelEvent::Kind kind;
};

constexpr Channel kChannels[] = {
    {"+selected-slave", SentinelEvent::Kind::Promoting},
    {"+failover-state-send-slaveof-noone", SentinelEvent::Kind::Promoting},
    {"+promoted-slave", SentinelEvent::Kind::Promoted},
    {"+switch-master", SentinelEvent::Kind::Switched},
    {"-failover-abort-not-elected", SentinelEvent::Kind::Aborted},
    {"-failover-abort-no-good-slave", SentinelEvent::Kind::Aborted},
    {"-failover-abort-slave-timeout", SentinelEvent::Kind::Aborted},
};
constexpr std::size_t kChannelCount = sizeof kChannels / sizeof kChannels[0];

std::vector<std::string> words(std::string_view text) {
  std::vector<std::string> out;
  std::istringstream in{std::string(text)};
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// One message as a SentinelEvent (see SentinelEvents.h); nullopt when the channel or payload is
// not one of those.
std::optional<SentinelEvent> parseSentinelEvent(std::string_view channel, std::string_view payload) {
  const auto known = std::find_if(std::begin(kChannels), std::end(kChannels),
                                  [&](const Channel& candidate) { return channel == candidate.name; });
  if (known == std::end(kChannels)) return std::nullopt;
  SentinelEvent event;
  event.kind = known->kind;
  const std::vector<std::string> w = words(payload);
  switch (event.kind) {
    case SentinelEvent::Kind::Switched:  // <name> <old ip> <old port> <new ip> <new port>
      if (w.size() != 5 || !toMasterAddress(w[1], w[2], event.from) || !toMasterAddress(w[3], w[4], event.to)) {
        return std::nullopt;
      }
      event.masterName = w[0];
      return event;
    case SentinelEvent::Kind::Aborted:  // master <name> <ip> <port>
      if (w.size() != 4 || w[0] != "master" || !toMasterAddress(w[2], w[3], event.from)) return std::nullopt;
      event.masterName = w[1];
      return event;
    default:  // slave <ip:port> <ip> <port> @ <name> <master ip> <master port>
      if (w.size() != 8 || w[0] != "slave" || w[4] != "@" || !toMasterAddress(w[2], w[3], event.to) ||
          !toMasterAddress(w[6], w[7], event.from)) {
        return std::nullopt;
      }
      event.masterName = w[5];
      return event;
  }
}

}  // namespace

SentinelEvents::SentinelEvents(std::vector<ConnectionOptions> sentinels, PoolOptions backoff, Handler handler)
    : sentinels_(std::move(sentinels)),
      backoff_(backoff),
      handler_(std::move(handler)),
      wakeFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wakeFd_ < 0) throw LockError("dlock: eventfd failed for the sentinel subscriptions");
}

SentinelEvents::~SentinelEvents() {
  stop();
  ::close(wakeFd_);
}

void SentinelEvents::start() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (started_ || stopping_) return;
  started_ = true;
  for (const auto& sentinel : sentinels_) threads_.emplace_back([this, &sentinel] { run(sentinel); });
}

void SentinelEvents::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  const std::uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof one);  // never read: stays readable for every poll
  stopped_.notify_all();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
}

bool SentinelEvents::stopping() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stopping_;
}

bool SentinelEvents::pause(milliseconds duration) {
  std::unique_lock<std::mutex> guard(mutex_);
  return !stopped_.wait_for(guard, duration, [this] { return stopping_; });
}

void SentinelEvents::run(const ConnectionOptions& sentinel) {
  unsigned failures = 0;
  bool everConnected = false;
  while (!stopping()) {
    std::unique_ptr<Connection> connection;
    try {
      connection = std::make_unique<Connection>(sentinel);
    } catch (const std::exception& error) {
      ++failures;
      logger()->debug("dlock: sentinel {} unreachable for failover events: {}", sentinel.address(), error.what());
      const milliseconds doubled(backoff_.reconnectBackoff.count() << std::min(failures - 1, 16U));
      if (!pause(std::min(backoff_.maxReconnectBackoff, doubled))) return;
      continue;
    }
    if (everConnected) reconnects_.fetch_add(1, std::memory_order_relaxed);
    everConnected = true;
    failures = 0;
    try {
      serve(*connection, sentinel);
      return;  // stopping
    } catch (const std::exception& error) {
      if (stopping()) return;
      logger()->warn("dlock: lost the failover events of sentinel {}: {}", sentinel.address(), error.what());
      if (!pause(backoff_.reconnectBackoff)) return;
    }
  }
}

void SentinelEvents::serve(Connection& connection, const ConnectionOptions& sentinel) {
  Argv subscribe = {"SUBSCRIBE"};
  for (const auto& channel : kChannels) subscribe.push_back(channel.name);
  connection.append(subscribe);
  connection.flushWrites();
  const milliseconds replyTimeout = sentinel.commandTimeout;
  std::size_t confirmed = 0;
  const auto confirmBy = Steady::now() + replyTimeout;
  Steady::time_point lastActivity = Steady::now();
  // A PING awaits its reply while `awaitingPong`; (a plain pair: GCC's -Wmaybe-uninitialized
  // misfires on an optional time_point here).
  bool awaitingPong = false;
  Steady::time_point pingSentAt{};

  while (true) {
    while (ReplyPtr reply = connection.takeBufferedReply()) {
      lastActivity = Steady::now();
      if (reply->type == REDIS_REPLY_ERROR) throwReplyError(*reply, "SUBSCRIBE on sentinel " + sentinel.address());
      if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1 || reply->element[0]->type != REDIS_REPLY_STRING) {
        continue;
      }
      const std::string_view kind = replyText(*reply->element[0]);
      if (kind == "pong") {
        awaitingPong = false;
      } else if (kind == "subscribe") {
        if (++confirmed == kChannelCount) handler_(SentinelEvent{});  // Resubscribed
      } else if (kind == "message" && reply->elements == 3) {
        if (auto event = parseSentinelEvent(replyText(*reply->element[1]), replyText(*reply->element[2]))) {
          handler_(*event);
        }
      }
      // The handler may have taken a while: count from now, not from before it.
      lastActivity = Steady::now();
      if (awaitingPong) pingSentAt = lastActivity;
    }

    const auto now = Steady::now();
    if (confirmed < kChannelCount && now > confirmBy) throw ConnectionError("no SUBSCRIBE confirmation in time");
    if (awaitingPong && now - pingSentAt > replyTimeout) throw ConnectionError("no PING reply in time");
    if (!awaitingPong && now - lastActivity >= kPingInterval) {
      connection.append({"PING"});
      connection.flushWrites();
      pingSentAt = now;
      awaitingPong = true;
    }
    const auto nextCheck = confirmed < kChannelCount ? confirmBy
                           : awaitingPong            ? pingSentAt + replyTimeout
                                                     : lastActivity + kPingInterval;
    const auto wait = std::chrono::duration_cast<milliseconds>(nextCheck - now);
    const int timeoutMs = static_cast<int>(std::clamp<long long>(wait.count() + 1, 1, 1000));

    pollfd fds[2] = {{connection.fd(), POLLIN, 0}, {wakeFd_, POLLIN, 0}};
    const int ready = ::poll(fds, 2, timeoutMs);
    if (ready < 0 && errno != EINTR) throw ConnectionError("poll failed");
    if (ready <= 0) continue;
    if ((fds[1].revents & POLLIN) != 0) return;  // stopping
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) connection.readAvailable();
  }
}

}  // namespace dlock::detail
