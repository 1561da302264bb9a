// SPDX-License-Identifier: Apache-2.0
// Subscriber.h — one pub/sub connection per server, shared by every waiter of an operator.
//
// watch(channel) subscribes (once per channel, however many waiters) and returns only when the
// server has confirmed the subscription, so a release published after watch() returns is never
// missed. A background thread owns the connection: it reads messages, PINGs when idle to notice
// a dead server, and on any failure reconnects with back-off and subscribes again. After a
// connection loss every waiter is woken (a release may have been missed while disconnected) once
// its channel is confirmed on the new connection, never before: a retry in between would miss a
// release published before the new SUBSCRIBE. A failed reconnect wakes them as well (their retry
// meets the failure and reports it), and the confirmation, when it comes, wakes them again. A
// channel the server drops on its own (a cluster slot moving away) wakes its waiters too.
// A refused SUBSCRIBE fails the watch() that asked, typed as a reply of that kind (TRYAGAIN is a
// ConnectionError), and the next watch() asks again; refused again after a reconnect, it wakes
// the channel's waiters. Channels nobody watches any more stay subscribed for `linger`, so a hot
// key does not pay SUBSCRIBE/UNSUBSCRIBE on every wait; with none left, PINGs still check the
// connection.
// `sharded` uses SSUBSCRIBE/SUNSUBSCRIBE (Redis Cluster's sharded pub/sub).
// The connection and these rules are PubSubConnection's, whose watchers the waiters are.
// Owner: one operator; watches keep the connection until they end. Thread safety: thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "MessageWatch.h"
#include "dlock/IOperator.h"
#include "dlock/common/RedisOptions.h"

namespace dlock::detail {

class PubSubConnection;

struct SubscriberOptions {
  bool sharded = false;
  std::chrono::milliseconds pingInterval{std::chrono::seconds(1)};
  std::chrono::milliseconds linger{std::chrono::seconds(5)};
};

class Subscriber {
 public:
  // Where to connect now; asked again at every reconnect (Sentinel: the current master).
  using Target = std::function<ConnectionOptions()>;

  Subscriber(Target target, PoolOptions backoff, SubscriberOptions options = {});
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;
  ~Subscriber();

  // A watch on `channel`, subscribed and confirmed. ConnectionError when the subscription is
  // not confirmed within the connect + command timeouts; BackendError when the server refuses it.
  std::unique_ptr<IReleaseWatch> watch(const std::string& channel);

  // A watch on `channel` for the messages whose payload starts with `prefix|` (PubSubConnection).
  std::unique_ptr<IMessageWatch> watchFor(const std::string& channel, const std::string& prefix);

  // True when this subscriber holds a confirmed subscription to `channel` (its own
  // subscription then counts among a PUBLISH's receivers).
  [[nodiscard]] bool subscribed(const std::string& channel) const;

  // Drops the connection; the thread reconnects to target() (e.g. after a failover).
  void reconnect();
  // Stops without waiting for the thread (a connect in progress may take its whole timeout to
  // give up): waiters wake at once; the destructor joins.
  void retire();

  // Connections re-opened after a failure.
  [[nodiscard]] std::uint64_t reconnects() const noexcept;

 private:
  const std::shared_ptr<PubSubConnection> connection_;
};

}  // namespace dlock::detail
