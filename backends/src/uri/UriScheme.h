// SPDX-License-Identifier: Apache-2.0
// UriScheme.h — what a URI scheme declares: its options, its shape, and how it becomes an operator.
// Each scheme is one <Name>Scheme.cpp; the parser (UriParser.cpp) and the redaction
// (UriRedaction.cpp) know schemes only through this, and Connect.cpp lists them.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/IOperator.h"
#include "dlock/common/RedisOptions.h"
#include "dlock/uri.h"

namespace dlock::detail {

class UriParser;

// A redlock node's timeout: the default of its connection timeouts, for the schemes that take it.
using NodeTimeout = std::optional<std::chrono::milliseconds>;

struct UriScheme {
  std::string_view name;                 // lower case, without "://"
  std::vector<UriOption> options;        // the query options it takes, in the order messages list them
  std::vector<UriOption> memberOptions;  // those each member of its list takes besides its own
  int defaultPort = 0;                   // 0: nothing may follow "scheme://" (memory://)
  bool oneHost = false;
  bool memberList = false;  // also "scheme://<uri>;<uri>;...", when a "://" follows the scheme's
  bool tls = false;         // its connections use TLS (the TLS options are its own)
  bool socketPath = false;  // "scheme://[userinfo@]/absolute/path": a Unix socket, no hosts
  // Reads the path after the hosts ("" when none) into `uri`, failing through `parser`; required
  // unless defaultPort is 0.
  void (*path)(const UriParser& parser, std::string_view path, ParsedUri& uri) = nullptr;
  std::shared_ptr<IOperator> (*connect)(const ParsedUri& uri, NodeTimeout nodeTimeout) = nullptr;
  // Checks the options together once each value is checked, and reads those that fill `uri`'s
  // fields (optional); fails through `parser`.
  void (*check)(const UriParser& parser, ParsedUri& uri) = nullptr;
};

// Every scheme, in the order messages list them (Connect.cpp, the one place that names them all).
const std::vector<const UriScheme*>& uriSchemes();
const UriScheme& redisScheme();
const UriScheme& redissScheme();
const UriScheme& sentinelScheme();
const UriScheme& redissSentinelScheme();
const UriScheme& clusterScheme();
const UriScheme& redissClusterScheme();
const UriScheme& unixScheme();
const UriScheme& redlockScheme();
const UriScheme& memoryScheme();

// The scheme named `name` (lower case); null when there is none.
const UriScheme* findScheme(std::string_view name);
// The option `name` of any scheme, or of any member of a list; null when none takes it.
const UriOption* anyOption(std::string_view name);

// The operator of a parsed URI (a member of a redlock list too).
std::shared_ptr<IOperator> connectParsed(const ParsedUri& uri, NodeTimeout nodeTimeout = std::nullopt);

// The options of every scheme that reaches Redis servers (CommonOptions.cpp): connect_timeout,
// command_timeout, pool_size, pool_wait, prefix, lazy_connect; then `own`.
std::vector<UriOption> withCommonOptions(std::vector<UriOption> own);
// The TLS options of a TLS scheme (TlsOptions.cpp): tls_ca_file, tls_ca_dir, tls_cert_file,
// tls_key_file, tls_server_name, tls_verify; then `own`.
std::vector<UriOption> withTlsOptions(std::vector<UriOption> own);
// Fails unless tls_verify is full or none and tls_cert_file and tls_key_file come together.
void checkTlsOptions(const UriParser& parser, ParsedUri& uri);
// TLS as the URI's scheme and options say: off for a scheme without TLS.
TlsOptions tlsFrom(const ParsedUri& uri);
// The connection to `endpoint` (or the URI's Unix socket) with the URI's TLS, credentials,
// database and timeouts; `connection` carries the defaults of the options the URI leaves out.
ConnectionOptions connectionFrom(const ParsedUri& uri, const Endpoint& endpoint, ConnectionOptions connection = {});
// The pool the URI's pool_size and pool_wait give; `pool` carries the defaults.
PoolOptions poolFrom(const ParsedUri& uri, PoolOptions pool = {});
// The prefix option, else kDefaultKeyPrefix.
std::string keyPrefixFrom(const ParsedUri& uri);
// The fence_ttl option, else kDefaultFenceTtl.
std::chrono::milliseconds fenceTtlFrom(const ParsedUri& uri);
// One server of a redis:// URI, or of a redlock host list (RedisScheme.cpp).
std::shared_ptr<IOperator> connectRedisNode(const ParsedUri& uri, const Endpoint& endpoint, NodeTimeout nodeTimeout);

// An option's value as the declaration's type reads it; `fallback` when the URI leaves it out.
inline std::chrono::milliseconds durationOf(const ParsedUri& uri, const UriOption& option,
                                            std::chrono::milliseconds fallback) {
  return uri.duration(std::string(option.name), fallback);
}
inline std::size_t countOf(const ParsedUri& uri, const UriOption& option, std::size_t fallback) {
  return uri.count(std::string(option.name), fallback);
}
inline std::string textOf(const ParsedUri& uri, const UriOption& option, const std::string& fallback = "") {
  return uri.text(std::string(option.name), fallback);
}

}  // namespace dlock::detail
