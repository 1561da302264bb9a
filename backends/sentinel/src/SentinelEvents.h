// SPDX-License-Identifier: Apache-2.0
// SentinelEvents.h — what the sentinels say about failovers, as it happens.
//
// One PubSubConnection per sentinel, listening on the channels below: a failover's progress is
// published only by the sentinel that leads it, and any sentinel may be the leader. The messages
// become SentinelEvents for the handler:
//
//   channel                               event       payload
//   +selected-slave                       Promoting   slave <ip:port> <ip> <port> @ <name> <ip> <port>
//   +failover-state-send-slaveof-noone    Promoting   (the same)
//   +promoted-slave                       Promoted    (the same)
//   +switch-master                        Switched    <name> <old ip> <old port> <new ip> <new port>
//   -failover-abort-not-elected,
//   -failover-abort-no-good-slave,
//   -failover-abort-slave-timeout         Aborted     master <name> <ip> <port>
//   (a subscription (re)confirmed)        Resubscribed (a switch may have gone unseen meanwhile)
//
// The handler runs on the connection thread of the sentinel that spoke, with no lock held, and
// may block (that sentinel's messages wait meanwhile). It must not throw.
// Owner: one SentinelOperator. Thread safety: thread-safe. stop() and destruction join the
// threads, which takes up to the sentinel connect + command timeouts while one is connecting.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "MasterResolver.h"
#include "dlock/common/RedisOptions.h"

namespace dlock::detail {

class PubSubConnection;

struct SentinelEvent {
  enum class Kind { Promoting, Promoted, Switched, Aborted, Resubscribed };
  Kind kind = Kind::Resubscribed;
  std::string masterName;  // empty for Resubscribed
  MasterAddress from;      // the master being (or that was) replaced
  MasterAddress to;        // the replica being promoted, or the new master (not for Aborted)
};

class SentinelEvents {
 public:
  using Handler = std::function<void(const SentinelEvent&)>;

  // `sentinels`: how to reach each one (credentials, timeouts); `backoff`: reconnect delays.
  SentinelEvents(std::vector<ConnectionOptions> sentinels, PoolOptions backoff, Handler handler);
  SentinelEvents(const SentinelEvents&) = delete;
  SentinelEvents& operator=(const SentinelEvents&) = delete;
  ~SentinelEvents();

  // Starts the threads; later calls, and calls after stop(), do nothing.
  void start();
  // Stops and joins the threads; later calls do nothing.
  void stop();

  // Subscription connections re-opened after a failure.
  [[nodiscard]] std::uint64_t reconnects() const noexcept;

 private:
  const Handler handler_;
  const std::vector<std::unique_ptr<PubSubConnection>> connections_;  // one per sentinel

  std::mutex mutex_;
  bool started_ = false;   // guarded by mutex_
  bool stopping_ = false;  // guarded by mutex_
};

}  // namespace dlock::detail
