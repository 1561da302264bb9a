// SPDX-License-Identifier: Apache-2.0
// redis+sentinel://[user:pass@]h1:p1,h2:p2/master[/db][?opts] — a master the sentinels name;
// rediss+sentinel:// the same over TLS, to the sentinels and to the data nodes they name alike.
#include "dlock/sentinel/SentinelOperator.h"
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {
namespace {

constexpr UriOption kSentinelUser{"sentinel_user", UriOptionType::Text, "the sentinels' ACL user"};
constexpr UriOption kSentinelPassword{"sentinel_password", UriOptionType::Secret, "the sentinels' password"};
constexpr UriOption kWaitReplicas{"wait_replicas", UriOptionType::Count,
                                  "replicas that must acknowledge an acquisition (WAIT)"};
constexpr UriOption kWaitTimeout{"wait_timeout", UriOptionType::Duration, "how long an acquisition waits for them"};

void readPath(const UriParser& parser, std::string_view path, ParsedUri& uri) {
  const auto slash = path.find('/');
  const std::string_view master = path.substr(0, slash);
  if (master.empty()) parser.fail("no master name (redis+sentinel://host:port/mastername)");
  // A password with a raw '/' would otherwise end up in the master name, shown by describe().
  if (master.find('@') != std::string_view::npos) parser.fail("an '@' in the master name");
  uri.masterName = std::string(master);
  if (slash != std::string_view::npos) uri.db = parser.database(path.substr(slash + 1));
}

// The URI's user and password are the data nodes'; the sentinels' come from sentinel_user and
// sentinel_password. connect_timeout and command_timeout, when given, apply to both.
std::shared_ptr<IOperator> connectSentinel(const ParsedUri& uri, NodeTimeout) {
  SentinelOptions options;
  for (const auto& host : uri.hosts) options.sentinels.push_back({host.host, host.port});
  options.masterName = uri.masterName;
  options.connection = connectionFrom(uri, uri.hosts.front());  // its host and port are not used
  options.pool = poolFrom(uri);
  options.sentinelUser = textOf(uri, kSentinelUser);
  options.sentinelPassword = textOf(uri, kSentinelPassword);
  ConnectionOptions sentinelDefaults;
  sentinelDefaults.connectTimeout = options.sentinelConnectTimeout;
  sentinelDefaults.commandTimeout = options.sentinelCommandTimeout;
  const ConnectionOptions sentinels = connectionFrom(uri, uri.hosts.front(), sentinelDefaults);
  options.sentinelConnectTimeout = sentinels.connectTimeout;
  options.sentinelCommandTimeout = sentinels.commandTimeout;
  options.keyPrefix = keyPrefixFrom(uri);
  options.fenceTtl = fenceTtlFrom(uri);
  options.waitReplicas = countOf(uri, kWaitReplicas, 0);
  options.waitTimeout = durationOf(uri, kWaitTimeout, options.waitTimeout);
  return std::make_shared<SentinelOperator>(std::move(options));
}

UriScheme makeSentinelScheme(bool tls) {
  UriScheme sentinel;
  sentinel.name = tls ? "rediss+sentinel" : "redis+sentinel";
  std::vector<UriOption> own = {kSentinelUser, kSentinelPassword, kWaitReplicas, kWaitTimeout};
  sentinel.options = withCommonOptions(tls ? withTlsOptions(own) : own);
  sentinel.tls = tls;
  if (tls) sentinel.check = checkTlsOptions;
  sentinel.defaultPort = 26379;
  sentinel.path = readPath;
  sentinel.connect = connectSentinel;
  return sentinel;
}

}  // namespace

const UriScheme& sentinelScheme() {
  static const UriScheme scheme = makeSentinelScheme(false);
  return scheme;
}

const UriScheme& redissSentinelScheme() {
  static const UriScheme scheme = makeSentinelScheme(true);
  return scheme;
}

}  // namespace dlock::detail
