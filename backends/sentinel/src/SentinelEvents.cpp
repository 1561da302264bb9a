// SPDX-License-Identifier: Apache-2.0
#include "SentinelEvents.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>

#include "redis/src/PubSubConnection.h"

namespace dlock::detail {
namespace {

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

std::vector<std::unique_ptr<PubSubConnection>> connectionsTo(const std::vector<ConnectionOptions>& sentinels,
                                                             const PoolOptions& backoff) {
  PubSubConnection::Options options;
  options.role = "failover-event subscriber";
  std::vector<std::unique_ptr<PubSubConnection>> connections;
  for (const auto& sentinel : sentinels) {
    connections.push_back(std::make_unique<PubSubConnection>([sentinel] { return sentinel; }, backoff, options));
  }
  return connections;
}

}  // namespace

SentinelEvents::SentinelEvents(std::vector<ConnectionOptions> sentinels, PoolOptions backoff, Handler handler)
    : handler_(std::move(handler)), connections_(connectionsTo(sentinels, backoff)) {}

SentinelEvents::~SentinelEvents() { stop(); }

void SentinelEvents::start() {
  std::lock_guard<std::mutex> guard(mutex_);
  if (started_ || stopping_) return;
  started_ = true;
  PubSubConnection::Listener listener;
  for (const auto& channel : kChannels) listener.channels.emplace_back(channel.name);
  listener.onMessage = [this](const std::string& channel, std::string_view payload) {
    if (auto event = parseSentinelEvent(channel, payload)) handler_(*event);
  };
  listener.onSubscribed = [this] { handler_(SentinelEvent{}); };  // Resubscribed
  for (const auto& connection : connections_) connection->listen(listener);
}

void SentinelEvents::stop() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  for (const auto& connection : connections_) connection->stop();
}

std::uint64_t SentinelEvents::reconnects() const noexcept {
  std::uint64_t total = 0;
  for (const auto& connection : connections_) total += connection->reconnects();
  return total;
}

}  // namespace dlock::detail
