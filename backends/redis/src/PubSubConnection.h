// SPDX-License-Identifier: Apache-2.0
// PubSubConnection.h — one pub/sub connection to one server and the table of its channels: the
// I/O of every subscription dlock keeps, written once.
//
// A background thread, started by the first client, owns the connection. It connects to target()
// (asked again at every reconnect; the pool's back-off between failed attempts), sends
// (S)SUBSCRIBE and (S)UNSUBSCRIBE as the table changes, matches their replies, reads messages,
// PINGs when idle to notice a dead server, and on any failure reconnects and subscribes again.
// stop() wakes it through an eventfd. The socket is a Connection's, so a forked child closes its
// copy (ForkSockets.h).
//
// Each channel has clients of two kinds:
//   watchers   release waiters, watch(): counted; woken as Subscriber.h describes. A channel
//              nobody watches stays subscribed for `linger`, then is unsubscribed.
//   listeners  message handlers, listen(): their channels stay subscribed until stop(); one the
//              server refuses or drops is asked again with the next idle PING.
// Handlers run on the connection's thread with no lock held. They may block (messages wait
// meanwhile) and call into this object, except stop(); they must not throw.
// Owner: a Subscriber (shared with its watches, hence make_shared) or SentinelEvents.
// Thread safety: thread-safe. stop() and destruction join the thread, which takes up to the
// connect + command timeouts while it is connecting.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "MessageWatch.h"
#include "Reply.h"
#include "dlock/IOperator.h"
#include "dlock/common/RedisOptions.h"

namespace dlock::detail {

class Connection;

class PubSubConnection : public std::enable_shared_from_this<PubSubConnection> {
 public:
  // Where to connect now; asked again at every reconnect (Sentinel: the current master).
  using Target = std::function<ConnectionOptions()>;

  struct Options {
    bool sharded = false;  // SSUBSCRIBE/SUNSUBSCRIBE (Redis Cluster's sharded pub/sub)
    std::chrono::milliseconds pingInterval{std::chrono::seconds(1)};
    std::chrono::milliseconds linger{std::chrono::seconds(5)};
    std::string role = "pub/sub connection";  // names it in log lines
  };

  struct Listener {
    std::vector<std::string> channels;
    std::function<void(const std::string& channel, std::string_view payload)> onMessage;
    // Every channel above confirmed on the connection: the first time, after each reconnect, and
    // after one that was dropped or refused is confirmed again.
    std::function<void()> onSubscribed;
  };

  PubSubConnection(Target target, PoolOptions backoff, Options options);
  PubSubConnection(const PubSubConnection&) = delete;
  PubSubConnection& operator=(const PubSubConnection&) = delete;
  ~PubSubConnection();

  // A watcher of `channel`, subscribed and confirmed. ConnectionError when the subscription is
  // not confirmed within the connect + command timeouts; a refusal is thrown typed as its reply.
  std::unique_ptr<IReleaseWatch> watch(const std::string& channel);

  // A watcher of `channel` that hears only messages whose payload starts with `prefix|` (a fair
  // waiter's token), subscribed and confirmed as watch() is.
  std::unique_ptr<IMessageWatch> watchFor(const std::string& channel, const std::string& prefix);

  // Adds a listener; returns at once (the confirmation is onSubscribed's).
  void listen(Listener listener);

  // True when `channel` is confirmed on the current connection.
  [[nodiscard]] bool subscribed(const std::string& channel) const;

  // Drops the connection; the thread reconnects to target().
  void reconnect();

  // Stops and joins the thread; watchers wake, handlers are not called any more. Later calls,
  // and later clients, do nothing.
  void stop();
  // stop() without the join: the thread ends on its own (after a connect in progress gives up);
  // waiters wake at once. A later stop() or the destructor joins it.
  void requestStop();

  // Connections re-opened after a failure.
  [[nodiscard]] std::uint64_t reconnects() const noexcept { return reconnects_.load(std::memory_order_relaxed); }

 private:
  using Steady = std::chrono::steady_clock;
  class Watch;
  class PrefixWatch;
  // A PrefixWatch's slot in its channel: the last message for its prefix, and its own wake-up, so
  // a message for one waiter's prefix wakes no other waiter of the channel.
  struct Wanted {
    std::string message;  // empty: none since the watcher last took one
    std::condition_variable arrived;
    std::function<void()> heard;  // its PrefixWatch's notifyOnMessage, told with `arrived`
    void wake() {
      arrived.notify_all();
      if (heard) heard();
    }
  };
  struct Channel {
    unsigned watchers = 0;                   // live watches
    std::vector<const Listener*> listeners;  // never unsubscribed while there are some
    bool requested = false;      // SUBSCRIBE sent (or queued) on the current connection
    bool confirmed = false;      // the server confirmed it
    bool unsubscribing = false;  // we sent UNSUBSCRIBE (linger ran out); its reply is ours
    std::string error;           // the server refused it (the reply's text)
    std::uint64_t events = 0;    // messages, and ends of the subscription its watchers must hear of
    std::uint64_t drops = 0;     // ends of the subscription the server made
    std::map<std::string, Wanted> wanted;  // by a PrefixWatch's prefix
    Steady::time_point idleSince;
    // Its release watchers' wake-up: a message on one channel wakes no waiter of another. What
    // concerns the whole channel wakes its PrefixWatches too (wakeAll); what concerns every
    // channel (a lost connection, a failed connect, stop), every channel's (notifyAll).
    std::condition_variable changed;
    // The release watchers that asked to be told (IReleaseWatch::notifyOnRelease), each told
    // whenever `changed` is notified; a Watch removes its own before it ends.
    std::vector<const std::function<void()>*> notified;
    void wakeWatchers() {
      changed.notify_all();
      for (const auto* heard : notified) (*heard)();
    }
    void wakeAll() {
      wakeWatchers();
      for (auto& [prefix, slot] : wanted) slot.wake();
    }
  };
  // Handler calls found while the lock was held, made once it is released.
  struct Calls {
    std::string channel;
    std::string_view payload;  // in the reply being handled
    std::vector<const Listener*> message;
    std::vector<const Listener*> subscribed;
  };

  const char* subscribeCommand() const { return options_.sharded ? "SSUBSCRIBE" : "SUBSCRIBE"; }
  const char* unsubscribeCommand() const { return options_.sharded ? "SUNSUBSCRIBE" : "UNSUBSCRIBE"; }
  void wake() const;
  void notifyAll();  // mutex_ held
  void startLocked();  // mutex_ held
  void run();
  std::unique_ptr<Connection> connect(unsigned& failures, bool& everConnected);
  void serve(Connection& connection);
  // Applies one reply to the table; true when it answered our PING.
  bool handle(const redisReply& reply, Calls& calls);
  void onConnectionLost(const std::string& why);
  void requestListened();  // mutex_ held: asks again for listened channels not subscribed

  const Target target_;
  const PoolOptions backoff_;
  const Options options_;
  const int wakeFd_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // the connect loop's pause, which stop() ends
  std::map<std::string, Channel> channels_;                 // guarded by mutex_
  std::vector<std::unique_ptr<const Listener>> listeners_;  // guarded by mutex_; each lives until destruction
  std::vector<std::pair<bool, std::string>> pending_;       // guarded by mutex_; (subscribe?, channel)
  std::deque<std::string> unanswered_;                      // guarded by mutex_; SUBSCRIBEs sent, in order
  std::uint64_t generation_ = 0;                            // guarded by mutex_; bumped per connection loss
  std::uint64_t connectFailures_ = 0;                       // guarded by mutex_; failed connect attempts
  std::string address_ = "(not connected)";                 // guarded by mutex_
  std::string lastError_;                                   // guarded by mutex_
  std::chrono::milliseconds confirmTimeout_{std::chrono::seconds(2)};  // guarded by mutex_
  bool stopping_ = false;                                   // guarded by mutex_
  bool dropRequested_ = false;                              // guarded by mutex_
  std::thread thread_;                                      // guarded by mutex_
  std::atomic<std::uint64_t> reconnects_{0};
};

}  // namespace dlock::detail
