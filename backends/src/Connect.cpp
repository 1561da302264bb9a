#include "dlock/connect.h"

#include <algorithm>
#include <optional>
#include <string>

#include "dlock/LockError.h"
#include "dlock/cluster/ClusterOperator.h"
#include "dlock/core/Uri.h"
#include "dlock/memory/MemoryOperator.h"
#include "dlock/redlock/RedlockOperator.h"
#include "dlock/sentinel/SentinelOperator.h"
#include "dlock/single/SingleOperator.h"

namespace dlock {
namespace {

// `connection` and `pool` carry the defaults of the options the URI leaves out.
ConnectionOptions connectionFrom(const ParsedUri& uri, const UriHost& host, ConnectionOptions connection = {}) {
  connection.host = host.host;
  connection.port = host.port;
  connection.user = uri.user;
  connection.password = uri.password;
  connection.db = uri.db;
  connection.connectTimeout = uri.duration("connect_timeout", connection.connectTimeout);
  connection.commandTimeout = uri.duration("command_timeout", connection.commandTimeout);
  return connection;
}

PoolOptions poolFrom(const ParsedUri& uri, PoolOptions pool = {}) {
  pool.size = uri.count("pool_size", pool.size);
  pool.waitTimeout = uri.duration("pool_wait", pool.waitTimeout);
  return pool;
}

// `timeout`, when given, is the default connect, command and pool-wait timeout (a redlock
// node's node_timeout).
std::shared_ptr<IOperator> connectSingle(const ParsedUri& uri, const UriHost& host,
                                         std::optional<std::chrono::milliseconds> timeout = std::nullopt) {
  ConnectionOptions connection;
  PoolOptions pool;
  if (timeout) connection.connectTimeout = connection.commandTimeout = pool.waitTimeout = *timeout;
  SingleOptions options;
  options.connection = connectionFrom(uri, host, connection);
  options.pool = poolFrom(uri, pool);
  options.keyPrefix = uri.text("prefix", kDefaultKeyPrefix);
  return std::make_shared<SingleOperator>(std::move(options));
}

std::shared_ptr<IOperator> connectCluster(const ParsedUri& uri) {
  ClusterOptions options;
  for (const auto& host : uri.hosts) options.seeds.push_back(ClusterSeed{host.host, host.port});
  options.connection = connectionFrom(uri, uri.hosts.front());
  options.pool = poolFrom(uri);
  options.keyPrefix = uri.text("prefix", kDefaultKeyPrefix);
  return std::make_shared<ClusterOperator>(std::move(options));
}

std::shared_ptr<IOperator> connectParsed(const ParsedUri& uri);

// redlock://[user:pass@]h1:p1,h2:p2,...[?opts]: one node per host, node_timeout for all.
// redlock://<uri>;<uri>;...: one node per member URI; node_timeout in a member's query is that
// node's (a redis:// member's default timeouts too), and the redlock waits for the slowest one's.
std::shared_ptr<IOperator> connectRedlock(const ParsedUri& uri) {
  RedlockOptions options;
  std::vector<std::shared_ptr<IOperator>> members;
  if (uri.members.empty()) {
    options.nodeTimeout = uri.duration("node_timeout", options.nodeTimeout);
    for (const auto& host : uri.hosts) members.push_back(connectSingle(uri, host, options.nodeTimeout));
  } else {
    std::chrono::milliseconds slowest{0};
    for (const ParsedUri& member : uri.members) {
      const auto nodeTimeout = member.duration("node_timeout", RedlockOptions().nodeTimeout);
      slowest = std::max(slowest, nodeTimeout);
      members.push_back(member.scheme == "redis" ? connectSingle(member, member.hosts.front(), nodeTimeout)
                                                 : connectParsed(member));
    }
    options.nodeTimeout = slowest;
  }
  std::vector<std::string> seen;
  for (const auto& member : members) {
    const std::string where = member->describe();
    if (where != "memory://" && std::find(seen.begin(), seen.end(), where) != seen.end()) {
      throw ConfigError("dlock: bad URI '" + uri.redacted + "': " + where + " appears twice in the redlock");
    }
    seen.push_back(where);
  }
  try {
    return std::make_shared<RedlockOperator>(std::move(members), options);
  } catch (const ConfigError& error) {
    std::string_view problem = error.what();
    if (problem.substr(0, 7) == "dlock: ") problem.remove_prefix(7);
    throw ConfigError("dlock: bad URI '" + uri.redacted + "': " + std::string(problem));
  }
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

std::shared_ptr<IOperator> connectParsed(const ParsedUri& uri) {
  if (uri.scheme == "memory") return std::make_shared<MemoryOperator>();
  if (uri.scheme == "redis") return connectSingle(uri, uri.hosts.front());
  if (uri.scheme == "redis+sentinel") return connectSentinel(uri);
  if (uri.scheme == "redis+cluster") return connectCluster(uri);
  if (uri.scheme == "redlock") return connectRedlock(uri);
  throw ConfigError("dlock: bad URI '" + uri.redacted + "': the " + uri.scheme +
                    " backend is not available in this build of dlock");
}

}  // namespace

std::shared_ptr<IOperator> connect(std::string_view text) { return connectParsed(parseUri(text)); }

}  // namespace dlock
