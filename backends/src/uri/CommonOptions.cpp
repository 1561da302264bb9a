// SPDX-License-Identifier: Apache-2.0
// The options of every scheme that reaches Redis servers, and what they set.
#include "uri/Probe.h"
#include "uri/UriScheme.h"

namespace dlock::detail {
namespace {

constexpr UriOption kConnectTimeout{"connect_timeout", UriOptionType::Duration, "timeout of a connection attempt"};
constexpr UriOption kCommandTimeout{"command_timeout", UriOptionType::Duration, "timeout of a command's reply"};
constexpr UriOption kPoolSize{"pool_size", UriOptionType::PositiveCount, "connections kept per server"};
constexpr UriOption kPoolWait{"pool_wait", UriOptionType::Duration, "how long a call waits for a free connection"};
constexpr UriOption kPrefix{"prefix", UriOptionType::Text, "the prefix of the Redis keys (default dlock:)"};
constexpr UriOption kFenceTtl{"fence_ttl", UriOptionType::Duration,
                              "how long a fencing counter lives after its key's last acquisition (default 24h)"};

}  // namespace

std::vector<UriOption> withCommonOptions(std::vector<UriOption> own) {
  own.insert(own.begin(), {kConnectTimeout, kCommandTimeout, kPoolSize, kPoolWait, kPrefix, kFenceTtl, kLazyConnect});
  return own;
}

ConnectionOptions connectionFrom(const ParsedUri& uri, const Endpoint& endpoint, ConnectionOptions connection) {
  connection.host = endpoint.host;
  connection.port = endpoint.port;
  connection.unixSocket = uri.socketPath;
  connection.tls = tlsFrom(uri);
  connection.user = uri.user;
  connection.password = uri.password;
  connection.db = uri.db;
  connection.connectTimeout = durationOf(uri, kConnectTimeout, connection.connectTimeout);
  connection.commandTimeout = durationOf(uri, kCommandTimeout, connection.commandTimeout);
  return connection;
}

PoolOptions poolFrom(const ParsedUri& uri, PoolOptions pool) {
  pool.size = countOf(uri, kPoolSize, pool.size);
  pool.waitTimeout = durationOf(uri, kPoolWait, pool.waitTimeout);
  return pool;
}

std::string keyPrefixFrom(const ParsedUri& uri) { return textOf(uri, kPrefix, kDefaultKeyPrefix); }

std::chrono::milliseconds fenceTtlFrom(const ParsedUri& uri) { return durationOf(uri, kFenceTtl, kDefaultFenceTtl); }

}  // namespace dlock::detail
