// SPDX-License-Identifier: Apache-2.0
// redis://[user:pass@]host:port[/db][?opts] — one server; rediss:// the same over TLS (default port 6379,
// as managed services name theirs in the URI).
#include "dlock/single/SingleOperator.h"
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {

std::shared_ptr<IOperator> connectRedisNode(const ParsedUri& uri, const Endpoint& endpoint, NodeTimeout nodeTimeout) {
  ConnectionOptions connection;
  PoolOptions pool;
  if (nodeTimeout) connection.connectTimeout = connection.commandTimeout = pool.waitTimeout = *nodeTimeout;
  SingleOptions options;
  options.connection = connectionFrom(uri, endpoint, connection);
  options.pool = poolFrom(uri, pool);
  options.keyPrefix = keyPrefixFrom(uri);
  options.fenceTtl = fenceTtlFrom(uri);
  return std::make_shared<SingleOperator>(std::move(options));
}

namespace {

UriScheme makeRedisScheme(bool tls) {
  UriScheme redis;
  redis.name = tls ? "rediss" : "redis";
  redis.options = withCommonOptions(tls ? withTlsOptions({}) : std::vector<UriOption>{});
  redis.tls = tls;
  if (tls) redis.check = checkTlsOptions;
  redis.defaultPort = 6379;
  redis.oneHost = true;
  redis.path = [](const UriParser& parser, std::string_view path, ParsedUri& uri) {
    if (!path.empty()) uri.db = parser.database(path);
  };
  redis.connect = [](const ParsedUri& uri, NodeTimeout nodeTimeout) {
    return connectRedisNode(uri, uri.hosts.front(), nodeTimeout);
  };
  return redis;
}

}  // namespace

const UriScheme& redisScheme() {
  static const UriScheme scheme = makeRedisScheme(false);
  return scheme;
}

const UriScheme& redissScheme() {
  static const UriScheme scheme = makeRedisScheme(true);
  return scheme;
}

}  // namespace dlock::detail
