#include "dlock/connect.h"

#include <string>

#include "dlock/LockError.h"
#include "dlock/cluster/ClusterOperator.h"
#include "dlock/core/Uri.h"
#include "dlock/memory/MemoryOperator.h"
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

std::shared_ptr<IOperator> connectCluster(const ParsedUri& uri) {
  ClusterOptions options;
  for (const auto& host : uri.hosts) options.seeds.push_back(ClusterSeed{host.host, host.port});
  options.connection = connectionFrom(uri, uri.hosts.front());
  options.pool = poolFrom(uri);
  options.keyPrefix = uri.text("prefix", kDefaultKeyPrefix);
  return std::make_shared<ClusterOperator>(std::move(options));
}

}  // namespace

std::shared_ptr<IOperator> connect(std::string_view text) {
  const ParsedUri uri = parseUri(text);
  if (uri.scheme == "memory") return std::make_shared<MemoryOperator>();
  if (uri.scheme == "redis") return connectSingle(uri);
  if (uri.scheme == "redis+cluster") return connectCluster(uri);
  throw ConfigError("dlock: bad URI '" + uri.redacted + "': the " + uri.scheme +
                    " backend is not available in this build of dlock");
}

}  // namespace dlock
