// SPDX-License-Identifier: Apache-2.0
#include "Subscriber.h"

#include <utility>

#include "PubSubConnection.h"

namespace dlock::detail {

namespace {

PubSubConnection::Options connectionOptions(const SubscriberOptions& options) {
  PubSubConnection::Options out;
  out.sharded = options.sharded;
  out.pingInterval = options.pingInterval;
  out.linger = options.linger;
  out.role = "release subscriber";
  return out;
}

}  // namespace

Subscriber::Subscriber(Target target, PoolOptions backoff, SubscriberOptions options)
    : connection_(std::make_shared<PubSubConnection>(std::move(target), backoff, connectionOptions(options))) {}

// Watches that outlive this object keep the connection object, stopped: they wake at once.
Subscriber::~Subscriber() { connection_->stop(); }

std::unique_ptr<IReleaseWatch> Subscriber::watch(const std::string& channel) { return connection_->watch(channel); }

std::unique_ptr<IMessageWatch> Subscriber::watchFor(const std::string& channel, const std::string& prefix) {
  return connection_->watchFor(channel, prefix);
}

bool Subscriber::subscribed(const std::string& channel) const { return connection_->subscribed(channel); }

void Subscriber::reconnect() { connection_->reconnect(); }

void Subscriber::retire() { connection_->requestStop(); }

std::uint64_t Subscriber::reconnects() const noexcept { return connection_->reconnects(); }

}  // namespace dlock::detail
