// redis://[user:pass@]host:port[/db][?opts] — one server.
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
  return std::make_shared<SingleOperator>(std::move(options));
}

const UriScheme& redisScheme() {
  static const UriScheme scheme = [] {
    UriScheme redis;
    redis.name = "redis";
    redis.options = withCommonOptions({});
    redis.defaultPort = 6379;
    redis.oneHost = true;
    redis.path = [](const UriParser& parser, std::string_view path, ParsedUri& uri) {
      if (!path.empty()) uri.db = parser.database(path);
    };
    redis.connect = [](const ParsedUri& uri, NodeTimeout nodeTimeout) {
      return connectRedisNode(uri, uri.hosts.front(), nodeTimeout);
    };
    return redis;
  }();
  return scheme;
}

}  // namespace dlock::detail
