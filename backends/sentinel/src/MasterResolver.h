// SPDX-License-Identifier: Apache-2.0
// MasterResolver.h — finds the master of a Sentinel-monitored set, as the Sentinel client
// guidelines describe: ask each sentinel in turn `SENTINEL get-master-addr-by-name <name>` (a
// fresh connection each, within the sentinel timeouts), then confirm the answer with ROLE on the
// node itself, with the data nodes' credentials. The sentinel that named a confirmed master moves
// to the front of the list. An address that failed its ROLE check is not checked twice in one
// resolution.
// Owner: one SentinelOperator. Thread safety: thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/common/RedisOptions.h"
#include "dlock/sentinel/SentinelOperator.h"

namespace dlock::detail {

struct MasterAddress {
  std::string host;
  int port = 0;

  [[nodiscard]] std::string address() const { return host + ":" + std::to_string(port); }
  bool operator==(const MasterAddress& other) const { return host == other.host && port == other.port; }
  bool operator!=(const MasterAddress& other) const { return !(*this == other); }
};

// `host` and `port` as sentinels send them; false when the host is empty or the port not 1..65535.
[[nodiscard]] bool toMasterAddress(std::string_view host, std::string_view port, MasterAddress& out);

// The role in a ROLE reply ("master", "slave", "sentinel"); empty when the reply is not one.
[[nodiscard]] std::string_view roleIn(const redisReply& reply);

class MasterResolver {
 public:
  // `sentinel`: credentials and timeouts for the sentinels; `data`: for the data nodes (its host
  // and port are replaced by the ones the sentinels name).
  MasterResolver(std::vector<SentinelAddress> sentinels, std::string masterName, ConnectionOptions sentinel,
                 ConnectionOptions data);
  MasterResolver(const MasterResolver&) = delete;
  MasterResolver& operator=(const MasterResolver&) = delete;
  ~MasterResolver();

  // The confirmed master. ConnectionError naming each sentinel's answer when none is confirmed
  // (sentinels unreachable, the master unknown to them, or the named node not a master now);
  // BackendError when every sentinel that answered refused us (AUTH, ACL) or the master refused
  // the data credentials. A sentinel naming one of `stale` is taken as not up to date (a master
  // just failed over still says ROLE master until the sentinels turn it into a replica).
  MasterAddress resolve(const std::vector<MasterAddress>& stale = {});

  // The options to reach `master` as a data node.
  [[nodiscard]] ConnectionOptions dataOptions(const MasterAddress& master) const;
  // Every sentinel, in the configured order, as connection options (for the subscriptions).
  [[nodiscard]] std::vector<ConnectionOptions> sentinels() const;

  // "h1:p1,h2:p2", in the configured order.
  [[nodiscard]] const std::string& sentinelList() const noexcept { return sentinelList_; }

 private:
  [[nodiscard]] ConnectionOptions sentinelOptions(const SentinelAddress& sentinel) const;

  const std::string masterName_;
  const ConnectionOptions sentinel_;
  const ConnectionOptions data_;
  const std::vector<SentinelAddress> configured_;
  const std::string sentinelList_;

  mutable std::mutex mutex_;
  std::vector<SentinelAddress> order_;  // guarded by mutex_; asked front to back
};

}  // namespace dlock::detail
