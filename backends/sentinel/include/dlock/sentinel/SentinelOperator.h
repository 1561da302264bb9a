// SentinelOperator.h — the IOperator for a Redis master watched by Redis Sentinel.
//
// Defines SentinelAddress, SentinelOptions and SentinelOperator. The lock protocol is the one of
// SingleOperator (the same Lua scripts, keys and release channel), sent to whichever node is the
// master now:
//
//   finding the master   ask the sentinels in turn `SENTINEL get-master-addr-by-name <name>`
//                        (each within its own timeouts), confirm the answer with ROLE on the node
//                        itself; the sentinel that answered is asked first next time
//   finding it again     after a connection failure, and after a READONLY / MASTERDOWN / LOADING /
//                        NOREPLICAS reply
//   following failovers  a subscription to every sentinel (only the one leading a failover
//                        announces its steps): when a replica is selected for promotion, calls
//                        wait (at most the command timeout) instead of going to the old master,
//                        and move to the replica as soon as it answers ROLE master — before the
//                        sentinels name it, and before clients of a graceful SENTINEL FAILOVER
//                        would otherwise keep writing to a master whose writes are about to be
//                        thrown away. `+switch-master` moves them too; an aborted failover
//                        releases the waiting calls. A sentinel that still names a master just
//                        failed over is not believed for 30 s.
//   on a new master      a fresh connection pool; the release subscriber reconnects to it, which
//                        wakes every waiter to try again there
//
// A call that fails before its command can have run (no connection, or refused as above) is
// retried once on the master the sentinels name now, when it moved; any other failure is a
// ConnectionError (see IOperator.h). So during a failover a call either answers from a confirmed
// master or throws ConnectionError: never a BackendError for a node that is between roles, never
// "acquired" from a replica. Once every sentinel is unreachable, an operator that still has a
// working master keeps using it; one that must find the master fails with ConnectionError after
// at most (sentinels × (sentinelConnectTimeout + sentinelCommandTimeout)).
//
// What failover cannot keep: replication is asynchronous, so a lock (or any write) the old master
// acknowledged in the moments before it died may be missing on the promoted replica, and someone
// else may then take the key. waitReplicas narrows that window; see below and
// backends/sentinel/README.md.
//
// Replication-acked acquire (waitReplicas > 0): after taking the key, `WAIT waitReplicas
// waitTimeout` on the same connection. With fewer acknowledgements the key is released at once
// and lock() throws ConnectionError; see SentinelOptions::waitReplicas for why it is an error and
// not `false`. A refused WAIT (an ACL user without it) releases the key too; lock() throws
// BackendError.
//
// Owner: shared. Thread safety: thread-safe. Construction never blocks and opens nothing; the
// first call finds the master and starts the sentinel subscriptions (one thread per sentinel,
// plus the release subscriber's thread once a waiter watches a key). One more thread, idle until
// a promotion is announced, polls the replica being promoted. After fork(), a child's first call
// finds the master again with its own connections, subscriptions and threads; the parent's are
// never used there.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dlock/IOperator.h"
#include "dlock/common/RedisOptions.h"

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

  // The data nodes (master and replicas): credentials, database, timeouts, keep-alive.
  // `host` and `port` are ignored: the sentinels name the master.
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

class SentinelOperator final : public IOperator {
 public:
  // ConfigError when there is no sentinel, no master name, a zero pool size, or waitReplicas
  // without a positive waitTimeout.
  explicit SentinelOperator(SentinelOptions options);
  ~SentinelOperator() override;

  AcquireResult lock(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  ReleaseResult unlock(std::string_view key, std::string_view token) override;
  bool extend(std::string_view key, std::string_view token, std::chrono::milliseconds ttl) override;
  std::vector<ExtendResult> extendAll(const std::vector<LeaseRef>& leases, std::chrono::milliseconds ttl) override;
  std::uint64_t raiseFence(std::string_view key, std::uint64_t atLeast) override;
  std::unique_ptr<IReleaseWatch> watch(std::string_view key) override;
  LeaseInfo inspect(std::string_view key) override;
  // "redis+sentinel://h1:p1,h2:p2/name (master h:p)"; never a password.
  [[nodiscard]] std::string describe() const override;

  // "host:port" of the master calls go to now; empty until the first call found one.
  [[nodiscard]] std::string masterAddress() const;
  // How many times the master changed since construction (the first one found not counted).
  [[nodiscard]] std::uint64_t masterSwitches() const noexcept;
  // Connections re-opened after a failure, since construction (pools of every master so far,
  // the release subscriber and the sentinel subscription).
  [[nodiscard]] std::uint64_t reconnects() const noexcept;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlock
