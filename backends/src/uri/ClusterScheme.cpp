// SPDX-License-Identifier: Apache-2.0
// redis+cluster://[user:pass@]h1:p1,h2:p2[?opts] — seed nodes of a Redis Cluster; rediss+cluster:// the
// same over TLS (a cluster with tls-cluster yes announces its TLS ports in CLUSTER SLOTS).
#include "dlock/cluster/ClusterOperator.h"
#include "uri/UriParser.h"
#include "uri/UriScheme.h"

namespace dlock::detail {

namespace {

UriScheme makeClusterScheme(bool tls) {
  UriScheme cluster;
  cluster.name = tls ? "rediss+cluster" : "redis+cluster";
  cluster.options = withCommonOptions(tls ? withTlsOptions({}) : std::vector<UriOption>{});
  cluster.tls = tls;
  if (tls) cluster.check = checkTlsOptions;
  cluster.defaultPort = 6379;
  cluster.path = [](const UriParser& parser, std::string_view path, ParsedUri&) {
    if (!path.empty()) parser.fail("a cluster has only database 0; remove '/" + parser.quote(path).substr(1));
  };
  cluster.connect = [](const ParsedUri& uri, NodeTimeout) -> std::shared_ptr<IOperator> {
    ClusterOptions options;
    for (const auto& host : uri.hosts) options.seeds.push_back(ClusterSeed{host.host, host.port});
    options.connection = connectionFrom(uri, uri.hosts.front());
    options.pool = poolFrom(uri);
    options.keyPrefix = keyPrefixFrom(uri);
    options.fenceTtl = fenceTtlFrom(uri);
    return std::make_shared<ClusterOperator>(std::move(options));
  };
  return cluster;
}

}  // namespace

const UriScheme& clusterScheme() {
  static const UriScheme scheme = makeClusterScheme(false);
  return scheme;
}

const UriScheme& redissClusterScheme() {
  static const UriScheme scheme = makeClusterScheme(true);
  return scheme;
}

}  // namespace dlock::detail
