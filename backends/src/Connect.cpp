// SPDX-License-Identifier: Apache-2.0
#include "dlock/connect.h"

#include "dlock/LockError.h"
#include "dlock/detail/Fork.h"
#include "dlock/uri.h"
#include "uri/Probe.h"
#include "uri/UriScheme.h"

namespace dlock {
namespace detail {

const std::vector<const UriScheme*>& uriSchemes() {
  static const std::vector<const UriScheme*> schemes = {
      &redisScheme(),   &redissScheme(),   &sentinelScheme(), &redissSentinelScheme(), &clusterScheme(),
      &redissClusterScheme(), &unixScheme(), &redlockScheme(), &memoryScheme()};
  return schemes;
}

namespace {

// The table and every scheme in it (their options) made before any fork can matter: a child
// connects through them (MadeAtLoad).
const MadeAtLoad kSchemesMadeAtLoad([] {
  (void)uriSchemes();
  (void)uriOptions("");
});

}  // namespace

std::shared_ptr<IOperator> connectParsed(const ParsedUri& uri, NodeTimeout nodeTimeout) {
  const UriScheme* scheme = findScheme(uri.scheme);
  if (scheme == nullptr || scheme->connect == nullptr) {
    throw ConfigError("dlock: bad URI '" + uri.redacted + "': the " + uri.scheme +
                      " backend is not available in this build of dlock");
  }
  std::shared_ptr<IOperator> backend = scheme->connect(uri, nodeTimeout);
  if (!lazyConnect(uri)) probe(*backend);
  return backend;
}

}  // namespace detail

std::shared_ptr<IOperator> connect(std::string_view uri, const ConnectOptions& options) {
  ParsedUri parsed = parseUri(uri);
  if (options.lazy) parsed.options[std::string(detail::kLazyConnect.name)] = "true";  // as if the URI said so
  try {
    return detail::connectParsed(parsed);
  } catch (const ConnectionError& error) {
    if (!options.suggestLazy) throw;
    throw ConnectionError(std::string(error.what()) + " (lazy_connect=true defers this check to the first call)");
  }
}

}  // namespace dlock
