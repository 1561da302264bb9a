#include "dlock/connect.h"

#include <string>

#include "dlock/LockError.h"
#include "dlock/core/Uri.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/sentinel/SentinelOperator.h"
#include "dlock/single/SingleOperator.h"

namespace dlock {
namespace {

ConnectionOptions connectionFrom(const ParsedUri& uri, const UriHost& host) {
  ConnectionOptions connection;
  connection.host = host.host;
  connection.port = host.port;
  connection.user = uri.user;
  connection.password = uri.password;
  connection.db = uri.db;
  connection.connectTimeout = uri.duration("connect_timeout", connection.connectTimeout);
  connection.commandTimeout = uri.duration("command_timeout", connection.commandTimeout);
  return connection;
}

PoolOptions poolFrom(const ParsedUri& uri) {
  PoolOptions pool;
  pool.size = uri.count("pool_size", pool.size);
  pool.waitTimeout = uri.duration("pool_wait", pool.waitTimeout);
  return pool;
}

std::shared_ptr<IOperator> connectSingle(const ParsedUri& uri) {
  SingleOptions options;
  options.connection = connectionFrom(uri, uri.hosts.front());
  options.pool = poolFrom(uri);
  options.keyPrefix = uri.text("prefix", kDefaultKeyPrefix);
  return std::make_shared<SingleOperator>(std::move(options));
}

// The URI's user and password are the data nodes'; the sentinels' come from sentinel_user and
// sentinel_password. connect_timeout and command_timeout, when given, apply to both.
std::shared_ptr<IOperator> connectSentinel(const ParsedUri& uri) {
  SentinelOptions options;
  for (const auto& host : uri.hosts) options.sentinels.push_back({host.host, host.port});
  options.masterName = uri.masterName;
  options.connection = connectionFrom(uri, uri.hosts.front());  // its host and port are not used
  options.pool = poolFrom(uri);
  options.sentinelUser = uri.text("sentinel_user", "");
  options.sentinelPassword = uri.text("sentinel_password", "");
  options.sentinelConnectTimeout = uri.duration("connect_timeout", options.sentinelConnectTimeout);
  options.sentinelCommandTimeout = uri.duration("command_timeout", options.sentinelCommandTimeout);
  options.keyPrefix = uri.text("prefix", kDefaultKeyPrefix);
  options.waitReplicas = uri.count("wait_replicas", 0);
  options.waitTimeout = uri.duration("wait_timeout", options.waitTimeout);
  return std::make_shared<SentinelOperator>(std::move(options));
}

}  // namespace

std::shared_ptr<IOperator> connect(std::string_view text) {
  const ParsedUri uri = parseUri(text);
  if (uri.scheme == "memory") return std::make_shared<MemoryOperator>();
  if (uri.scheme == "redis") return connectSingle(uri);
  if (uri.scheme == "redis+sentinel") return connectSentinel(uri);
  throw ConfigError("dlock: bad URI '" + uri.redacted + "': the " + uri.scheme +
                    " backend is not available in this build of dlock");
}

}  // namespace dlock
