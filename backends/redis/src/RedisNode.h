// SPDX-License-Identifier: Apache-2.0
// RedisNode.h — one Redis endpoint as the lock uses it: a connection pool, and the one pub/sub
// connection of its release waiters, opened on first use.
// Owner: a Topology. Thread safety: thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ConnectionPool.h"
#include "Subscriber.h"

namespace dlock::detail {

class RedisNode {
 public:
  // `sharded`: release waiters use SSUBSCRIBE (a cluster's sharded pub/sub). `displayAddress`
  // names the node in messages ("host:port (master 'name')"); its address when empty.
  RedisNode(const ConnectionOptions& connection, const PoolOptions& pool, bool sharded,
            std::string displayAddress = {});
  RedisNode(const RedisNode&) = delete;
  RedisNode& operator=(const RedisNode&) = delete;
  ~RedisNode();

  [[nodiscard]] ConnectionPool& pool() noexcept { return pool_; }
  [[nodiscard]] const std::string& address() const noexcept { return pool_.address(); }  // "host:port"
  [[nodiscard]] const std::string& host() const noexcept { return pool_.connectionOptions().host; }
  [[nodiscard]] const ConnectionOptions& connectionOptions() const noexcept { return pool_.connectionOptions(); }
  [[nodiscard]] const std::string& displayAddress() const noexcept { return displayAddress_; }

  // The release subscriber, made on first use.
  [[nodiscard]] std::shared_ptr<Subscriber> subscriber();
  // The release subscriber if one was made; null otherwise.
  [[nodiscard]] std::shared_ptr<Subscriber> subscriberIfAny() const;
  // Drops the release subscriber, waking its waiters: the node no longer serves their keys.
  void retireSubscriber();

  // Connections re-opened after a failure, retired subscribers' included.
  [[nodiscard]] std::uint64_t reconnects() const;

 private:
  ConnectionPool pool_;
  const std::string displayAddress_;
  const PoolOptions backoff_;
  const bool sharded_;
  mutable std::mutex mutex_;
  std::shared_ptr<Subscriber> subscriber_;  // guarded by mutex_
  std::vector<std::shared_ptr<Subscriber>> retired_;  // guarded by mutex_; stopping, joined on destruction
  std::uint64_t retiredReconnects_ = 0;     // guarded by mutex_
};

}  // namespace dlock::detail
