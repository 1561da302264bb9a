// SPDX-License-Identifier: Apache-2.0
// SentinelOperator.h — the IOperator for a Redis master watched by Redis Sentinel: RedisOperator
// over the master the sentinels name, following failovers as they announce them; optionally an
// acquire counts only once replicas acknowledged it (waitReplicas). How failovers are followed and
// what they cannot keep: backends/sentinel/README.md.
// Owner: shared. Thread safety: thread-safe. Construction never blocks and opens nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlock/common/RedisOptions.h"
#include "dlock/redis/RedisOperator.h"

namespace dlock {

struct SentinelAddress {
  std::string host = "127.0.0.1";
  int port = 26379;

  // "host:port", for messages.
  [[nodiscard]] std::string address() const { return host + ":" + std::to_string(port); }
};

struct SentinelOptions {
  // Asked in this order at first; the one that last named a confirmed master moves to the front.
  std::vector<SentinelAddress> sentinels;
  // The name the sentinels monitor the master under (`sentinel monitor <name> ...`).
  std::string masterName;

  // The data nodes (master and replicas): credentials, database, timeouts, keep-alive, TLS (the
  // sentinels are reached with the same TLS). `host` and `port` are ignored: the sentinels name
  // the master.
  ConnectionOptions connection;
  PoolOptions pool;

  // The sentinels' own credentials (their requirepass, or an ACL user), separate from the data
  // nodes'; empty: no AUTH.
  std::string sentinelUser;
  std::string sentinelPassword;
  // Each sentinel gets this long to accept a connection, and this long to answer.
  std::chrono::milliseconds sentinelConnectTimeout{std::chrono::milliseconds(500)};
  std::chrono::milliseconds sentinelCommandTimeout{std::chrono::milliseconds(500)};

  std::string keyPrefix = kDefaultKeyPrefix;
  std::chrono::milliseconds fenceTtl = kDefaultFenceTtl;  // see RedisOptions.h

  // Replication-acked acquire. 0 (the default): off, an acquire counts once the master has it.
  // N > 0: an acquire counts only once N replicas acknowledged it within waitTimeout (Redis WAIT).
  // It narrows — it does not close — the window in which asynchronous replication loses a lock
  // at failover: Sentinel may promote a replica that did not acknowledge, unless N is the number
  // of replicas. With fewer acknowledgements the key is released and lock() throws
  // ConnectionError rather than returning `false`: `false` means "someone else holds it", and a
  // blocking lock() would keep waiting for a holder that does not exist while the replicas stay
  // away; an error says the backend cannot give the asked-for guarantee now, and the caller
  // decides whether to retry (as for any ConnectionError). Each acquire costs one more round trip
  // plus the replicas' acknowledgement; release and extend are not waited for.
  std::size_t waitReplicas = 0;
  // How long WAIT may block (must be positive when waitReplicas > 0).
  std::chrono::milliseconds waitTimeout{std::chrono::milliseconds(100)};
};

class SentinelOperator final : public RedisOperator {
 public:
  // ConfigError when there is no sentinel, no master name, a zero pool size, or waitReplicas
  // without a positive waitTimeout.
  explicit SentinelOperator(SentinelOptions options);

  // "host:port" of the master calls go to now; empty until the first call found one.
  [[nodiscard]] std::string masterAddress() const;
  // How many times the master changed since construction (the first one found not counted).
  [[nodiscard]] std::uint64_t masterSwitches() const noexcept;
};

}  // namespace dlock
